// CPU backend: the reductions (read pass, fused stats, stats above a threshold, counts, GP sums,
// log histogram). Each is one pass over the data.
#include <algorithm>
#include <cmath>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include <limits>
#include <type_traits>

#include "cpu_compact.hpp"
#include "cpu_parallel.hpp"
#include "gs/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/elementwise.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gs::kernels::cpu {
namespace {

using kernels::detail::fast_log_parts;
using kernels::detail::selected_above;
using kernels::detail::threshold_as_float;

constexpr float kFloatMax = std::numeric_limits<float>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

GS_CPU_CLONES double sum_chunk(const float* g, std::size_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]);
  return s;
}

// Which sums a chunk loop fills besides count, zeros, nonfinite, sum, min and max.
enum Fields : unsigned { kBasic = 0, kSq = 1, kLogSigned = 2, kAll = kSq | kLogSigned };

// The statistics pass over one chunk, branch-free so that it vectorizes (AVX2: 8 float / 4
// double lanes). With shifted = true it is stats_above: only finite x > t count, and y = x - shift
// enters the sums (as add() would); the caller guarantees shift <= the threshold, so y > 0 and
// y is increasing in x. Counts are summed in double (exact for integers below 2^53); ln y is
// fast_log split into an integer exponent (summed exactly) and a float remainder (summed in
// double), so the log costs no per-element double work; min and max are taken over the bit
// patterns of x (integer min/max: ordered like x for x >= 0, and GCC vectorizes them where it
// will not a float "conditional reduction" next to sums of other types). Fields not asked for
// are NaN in the result.
template <bool shifted, unsigned fields>
[[gnu::always_inline]] inline MagnitudeStats stats_chunk_impl(const float* g, std::size_t n, float t,
                                                               double shift) {
  // Every sum in double, counts and exponents included (exact: integers far below 2^53): GCC 12
  // vectorizes a reduction loop only when its accumulators share one type.
  double count = 0.0, zeros = 0.0, nonfinite = 0.0, sum_e = 0.0;
  double sum = 0.0, sum_sq = 0.0, sum_p = 0.0, sum_signed = 0.0;
  std::uint32_t kmn = 0x7f800000u, kmx = 0u;  // keys of x: +inf and +0 stand for "none yet"
  // Min and max in a loop of their own over the chunk (in L2 by then): one loop holding them and
  // the sums does not vectorize with GCC 12 ("multiple types in condition reduction").
#pragma omp simd reduction(min : kmn) reduction(max : kmx)
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t key = kernels::detail::magnitude_key(g[i]);
    bool use;
    if constexpr (shifted) use = (key > kernels::detail::magnitude_key(t)) & (key < kernels::detail::kNonfiniteKey);
    else use = (key != 0u) & (key < kernels::detail::kNonfiniteKey);
    const std::uint32_t kin = use ? key : 0x7f800000u, kax = use ? key : 0u;
    kmn = kin < kmn ? kin : kmn;
    kmx = kax > kmx ? kax : kmx;
  }
#pragma omp simd reduction(+ : count, zeros, nonfinite, sum_e, sum, sum_sq, sum_p, sum_signed)
  for (std::size_t i = 0; i < n; ++i) {
    const float v = g[i];
    const float x = std::fabs(v);
    bool use, zero, bad;
    double y, signed_y;
    if constexpr (shifted) {
      use = (x > t) & (x <= kFloatMax);  // then y = x - shift > 0 (shift <= threshold)
      y = static_cast<double>(x) - shift;
      signed_y = y;
      zero = false;
      bad = false;
    } else {
      bad = !(x <= kFloatMax);
      zero = x == 0.0f;
      use = !bad & !zero;
      y = static_cast<double>(x);
      signed_y = static_cast<double>(v);
    }
    count += use ? 1.0 : 0.0;
    zeros += zero ? 1.0 : 0.0;
    nonfinite += bad ? 1.0 : 0.0;
    const double yu = use ? y : 0.0;
    sum += yu;
    if constexpr ((fields & kSq) != 0) sum_sq += yu * yu;
    if constexpr ((fields & kLogSigned) != 0) {
      // ln of a safe stand-in where the element is not used keeps the lanes free of NaN/-inf.
      float yl = shifted ? static_cast<float>(y) : x;
      yl = use ? (yl > 0.0f ? yl : std::numeric_limits<float>::denorm_min()) : 1.0f;
      const kernels::detail::LogParts lp = fast_log_parts(yl);  // e = 0, p = 0 for the stand-in 1.0
      sum_e += static_cast<double>(lp.e);
      sum_p += static_cast<double>(lp.p);
      sum_signed += use ? signed_y : 0.0;
    }
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  MagnitudeStats s;
  s.count = static_cast<std::uint64_t>(count);
  s.zeros = static_cast<std::uint64_t>(zeros);
  s.nonfinite = static_cast<std::uint64_t>(nonfinite);
  s.sum = sum;
  s.sum_sq = (fields & kSq) != 0 ? sum_sq : kNaN;
  s.sum_log = (fields & kLogSigned) != 0 ? sum_e * 0.69314718055994531 + sum_p : kNaN;
  s.sum_signed = (fields & kLogSigned) != 0 ? sum_signed : kNaN;
  if (count) {  // y is increasing in x: its extremes are those of x
    const double off = shifted ? shift : 0.0;
    s.min = static_cast<double>(kernels::detail::key_to_float(kmn)) - off;
    s.max = static_cast<double>(kernels::detail::key_to_float(kmx)) - off;
  }
  return s;
}

// stats_above when shift > threshold (y = |x - shift| may be 0 or not monotone in x): the plain
// per-element form. No caller in this project takes this path; it exists for the contract.
MagnitudeStats above_chunk_any_shift(const float* g, std::size_t n, float t, double shift,
                                     StatsFields f) {
  MagnitudeStats s;
  for (std::size_t i = 0; i < n; ++i)
    if (kernels::detail::selected_above(g[i], t)) gs::add(s, static_cast<double>(std::fabs(g[i])) - shift);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (!f.sum_sq && !f.sum_log && !f.sum_signed) s.sum_sq = kNaN;
  if (!f.sum_log && !f.sum_signed) s.sum_log = s.sum_signed = kNaN;
  return s;
}

#if defined(__GNUC__) && defined(__x86_64__)
// fast_log_parts (gs/kernels/elementwise.hpp) on 8 lanes, the same operations in the same order:
// x > 0 finite; e in integer lanes, p in float lanes.
__attribute__((target("avx2"))) inline void log_parts_avx2(__m256 x, __m256i& e, __m256& p) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(16777216.0f)), tiny);
  const __m256i bits = _mm256_castps_si256(xs);
  e = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xff)),
                       _mm256_set1_epi32(127));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                                 _mm256_set1_epi32(0x3f800000)));
  const __m256 fold = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), fold);
  e = _mm256_sub_epi32(e, _mm256_castps_si256(fold));  // all-ones mask = -1: e + 1 where folded
  e = _mm256_add_epi32(e, _mm256_and_si256(_mm256_castps_si256(tiny), _mm256_set1_epi32(-24)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sv = _mm256_div_ps(_mm256_sub_ps(m, one), _mm256_add_ps(m, one));
  const __m256 s2 = _mm256_mul_ps(sv, sv);
  __m256 poly = _mm256_add_ps(_mm256_set1_ps(0.285714286f), _mm256_mul_ps(s2, _mm256_set1_ps(0.222222222f)));
  poly = _mm256_add_ps(_mm256_set1_ps(0.4f), _mm256_mul_ps(s2, poly));
  poly = _mm256_add_ps(_mm256_set1_ps(0.666666667f), _mm256_mul_ps(s2, poly));
  poly = _mm256_add_ps(_mm256_set1_ps(2.0f), _mm256_mul_ps(s2, poly));
  p = _mm256_mul_ps(sv, poly);
}

// The statistics passes in AVX2 intrinsics: GCC 12 will not vectorize the generic loop above (it
// reports control flow), and SIDCo and the fits run these passes, so they must run near memory
// speed. Per 8 floats: compares give the masks, counts are kept per lane (a used lane's all-ones
// mask subtracted), masked values are widened to two 4-lane double accumulators, min/max run over
// the keys in integer lanes; with logs, ln y is fast_log's split (exponents summed exactly in
// integer lanes, remainders widened to double).
// With the sum alone (SIDCo-E's stages), y = x - float(shift) is summed in 8 float lanes over
// blocks of 8 groups and each block widened to double: a lane adds 8 terms >= 0, so the sum's
// relative error stays below 8 * 2^-24 (passes.hpp, StatsFields), and the widening every 8
// groups instead of every group is what lets the pass keep up with memory on 2 cores
// (docs/BENCHMARKS.md). count * (shift - float(shift)), exact in double, corrects the shift.
// Non-finite values: a chunk first runs unchecked, as if every lane were finite (no finite mask,
// zeros = lanes - count, max over every lane's key); that max reaches the key of +Inf exactly
// when the chunk holds a NaN or an Inf, and the chunk then runs again checked (it is still in
// L2). Finite data, the common case, saves 3 to 6 operations per 8 floats.
// extra(checked, raw, x, finite) runs on every full group of 8, in order (raw = g[i..i+8),
// x = |raw|, finite its lane mask, all ones when unchecked): the hook that lets a compaction ride
// on the same read. It is copied before the unchecked run and restored for the checked one.
struct NoExtra {
  template <bool checked>
  void operator()(std::bool_constant<checked>, __m256, __m256, __m256) const {}
};
__attribute__((target("avx2"))) inline std::uint64_t lane_total(__m256i v) {
  alignas(32) std::uint32_t a[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), v);
  std::uint64_t s = 0;
  for (std::uint32_t x : a) s += x;
  return s;
}
template <bool shifted, bool squares, bool logs, bool checked, class Extra>
__attribute__((target("avx2"))) MagnitudeStats light_pass_avx2(const float* g, std::size_t n, float t,
                                                               double shift, Extra& extra, bool& dirty) {
  static_assert(!logs || squares, "the full pass fills every sum");
  // Lane counts and exponent sums are 32-bit: at most 1 and 150 per group of 8 (callers pass
  // chunks of kChunk).
  if (n > (std::size_t{1} << 26)) throw gs::Error("statistics pass: chunk too long for 32-bit lane sums");
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 fmax = _mm256_set1_ps(kFloatMax);
  const __m256 ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  const __m256 lo_bound = _mm256_set1_ps(shifted ? t : 0.0f);
  const __m256d sh = _mm256_set1_pd(shifted ? shift : 0.0);
  const __m256i none_min = _mm256_set1_epi32(0x7f800000);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), q0 = _mm256_setzero_pd(),
          q1 = _mm256_setzero_pd();
  __m256i kmn = none_min, kmx = _mm256_setzero_si256();
  __m256i esum = _mm256_setzero_si256();  // |e| <= 150 per element: no overflow within a chunk
  __m256i used = _mm256_setzero_si256(), zero_lanes = _mm256_setzero_si256(),
          finite_lanes = _mm256_setzero_si256();
  __m256d p0 = _mm256_setzero_pd(), p1 = _mm256_setzero_pd(), g0 = _mm256_setzero_pd(),
          g1 = _mm256_setzero_pd();
  constexpr bool float_blocks = !squares && !logs;
  const float shift_f = static_cast<float>(shifted ? shift : 0.0);
  const __m256 shf = _mm256_set1_ps(shift_f);
  __m256 fsum = _mm256_setzero_ps();
  const auto widen_block = [&]() __attribute__((target("avx2"))) {
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(fsum)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(fsum, 1)));
    fsum = _mm256_setzero_ps();
  };
  const auto group = [&](std::size_t i) __attribute__((target("avx2"), always_inline)) {
    const __m256 raw = _mm256_loadu_ps(g + i);
    const __m256 x = _mm256_and_ps(raw, absmask);
    __m256 use = _mm256_cmp_ps(x, lo_bound, _CMP_GT_OQ);
    __m256 finite = ones;
    if constexpr (checked) {
      finite = _mm256_cmp_ps(x, fmax, _CMP_LE_OQ);
      use = _mm256_and_ps(use, finite);
      if constexpr (!shifted) {
        zero_lanes = _mm256_sub_epi32(zero_lanes, _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ)));
        finite_lanes = _mm256_sub_epi32(finite_lanes, _mm256_castps_si256(finite));
      }
    }
    extra(std::bool_constant<checked>{}, raw, x, finite);
    const __m256i usei = _mm256_castps_si256(use);
    used = _mm256_sub_epi32(used, usei);
    const __m256i key = _mm256_castps_si256(x);
    kmn = _mm256_min_epu32(kmn, _mm256_blendv_epi8(none_min, key, usei));
    // Unchecked, the max runs over every lane: with all lanes finite it is the max of the used
    // ones whenever there is one (that one is above every unused lane), and it flags NaN/Inf.
    kmx = _mm256_max_epu32(kmx, checked ? _mm256_and_si256(key, usei) : key);
    if constexpr (float_blocks) {
      // Used lanes hold x > t, t the largest float <= threshold, so x is at least the float
      // after t, which is >= float(shift) as shift <= threshold: y >= 0. Unused lanes (NaN/Inf
      // among them) are masked to 0 after the subtraction.
      fsum = _mm256_add_ps(fsum, _mm256_and_ps(_mm256_sub_ps(x, shf), use));
      return;
    }
    const __m256d m0 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(usei)));
    const __m256d m1 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(usei, 1)));
    // Unused lanes may hold NaN/Inf: the masks zero them after the conversion.
    const __m256d y0 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), sh), m0);
    const __m256d y1 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), sh), m1);
    s0 = _mm256_add_pd(s0, y0);
    s1 = _mm256_add_pd(s1, y1);
    if constexpr (squares) {
      q0 = _mm256_add_pd(q0, _mm256_mul_pd(y0, y0));
      q1 = _mm256_add_pd(q1, _mm256_mul_pd(y1, y1));
    }
    if constexpr (logs) {
      // ln of a safe stand-in where the lane is unused (1.0: e = 0, p = 0), as the generic loop.
      __m256 yl = shifted ? _mm256_set_m128(_mm256_cvtpd_ps(y1), _mm256_cvtpd_ps(y0)) : x;
      yl = _mm256_max_ps(yl, _mm256_set1_ps(std::numeric_limits<float>::denorm_min()));
      yl = _mm256_blendv_ps(_mm256_set1_ps(1.0f), yl, use);
      __m256i e;
      __m256 pl;
      log_parts_avx2(yl, e, pl);
      esum = _mm256_add_epi32(esum, e);
      p0 = _mm256_add_pd(p0, _mm256_cvtps_pd(_mm256_castps256_ps128(pl)));
      p1 = _mm256_add_pd(p1, _mm256_cvtps_pd(_mm256_extractf128_ps(pl, 1)));
      if constexpr (shifted) {
        g0 = _mm256_add_pd(g0, y0);
        g1 = _mm256_add_pd(g1, y1);
      } else {
        g0 = _mm256_add_pd(g0, _mm256_and_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(raw)), m0));
        g1 = _mm256_add_pd(g1, _mm256_and_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(raw, 1)), m1));
      }
    }
  };
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {  // blocks of 8 groups: no counter, one widening per block
#pragma GCC unroll 8
    for (std::size_t b = 0; b < 64; b += 8) group(i + b);
    if constexpr (float_blocks) widen_block();
  }
  for (; i + 8 <= n; i += 8) group(i);
  if constexpr (float_blocks) widen_block();
  const std::uint64_t lanes = i;
  std::uint64_t count = lane_total(used), zeros = 0, nonfinite = 0;
  if constexpr (!shifted) {
    zeros = checked ? lane_total(zero_lanes) : lanes - count;
    nonfinite = checked ? lanes - lane_total(finite_lanes) : 0;
  }
  alignas(32) double pa[4], ga[4];
  alignas(32) std::int32_t ea[8];
  _mm256_store_pd(pa, _mm256_add_pd(p0, p1));
  _mm256_store_pd(ga, _mm256_add_pd(g0, g1));
  _mm256_store_si256(reinterpret_cast<__m256i*>(ea), esum);
  double sum_p = (pa[0] + pa[1]) + (pa[2] + pa[3]), sum_signed = (ga[0] + ga[1]) + (ga[2] + ga[3]);
  std::int64_t sum_e = 0;
  for (int l = 0; l < 8; ++l) sum_e += ea[l];
  alignas(32) double sa[4], qa[4];
  alignas(32) std::uint32_t mn[8], mx[8];
  _mm256_store_pd(sa, _mm256_add_pd(s0, s1));
  _mm256_store_pd(qa, _mm256_add_pd(q0, q1));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn), kmn);
  _mm256_store_si256(reinterpret_cast<__m256i*>(mx), kmx);
  double sum = (sa[0] + sa[1]) + (sa[2] + sa[3]), sum_sq = (qa[0] + qa[1]) + (qa[2] + qa[3]);
  // (count > 0 only: a shift beyond the float range rounds to Inf, and 0 * Inf is NaN.)
  if constexpr (float_blocks && shifted)
    if (count) sum -= static_cast<double>(count) * (shift - static_cast<double>(shift_f));
  std::uint32_t kn = 0x7f800000u, kx = 0u;
  for (int l = 0; l < 8; ++l) {
    kn = std::min(kn, mn[l]);
    kx = std::max(kx, mx[l]);
  }
  dirty = !checked && kx >= 0x7f800000u;
  if (dirty) return {};
  for (; i < n; ++i) {  // tail, same rules
    const float x = std::fabs(g[i]);
    const bool finite = x <= kFloatMax;
    const bool use = finite && x > (shifted ? t : 0.0f);
    if constexpr (!shifted) {
      zeros += x == 0.0f ? 1u : 0u;
      nonfinite += finite ? 0u : 1u;
    }
    if (!use) continue;
    ++count;
    const double y = static_cast<double>(x) - (shifted ? shift : 0.0);
    sum += y;
    sum_sq += y * y;
    if constexpr (logs) {
      float yl = shifted ? static_cast<float>(y) : x;
      yl = yl > 0.0f ? yl : std::numeric_limits<float>::denorm_min();
      const kernels::detail::LogParts lp = fast_log_parts(yl);
      sum_e += lp.e;
      sum_p += static_cast<double>(lp.p);
      sum_signed += shifted ? y : static_cast<double>(g[i]);
    }
    const std::uint32_t key = kernels::detail::magnitude_key(x);
    kn = std::min(kn, key);
    kx = std::max(kx, key);
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  MagnitudeStats s;
  s.count = count;
  s.zeros = zeros;
  s.nonfinite = nonfinite;
  s.sum = sum;
  s.sum_sq = squares ? sum_sq : kNaN;
  s.sum_log = logs ? static_cast<double>(sum_e) * 0.69314718055994531 + sum_p : kNaN;
  s.sum_signed = logs ? sum_signed : kNaN;
  if (count) {
    const double off = shifted ? shift : 0.0;
    s.min = static_cast<double>(kernels::detail::key_to_float(kn)) - off;
    s.max = static_cast<double>(kernels::detail::key_to_float(kx)) - off;
  }
  return s;
}
// One chunk: unchecked, and again checked when it held a NaN or an Inf (extra restored first).
// Float blocks whose 8-term lane sums overflow (values above FLT_MAX / 8) take the double sums.
template <bool shifted, bool squares, bool logs, class Extra>
__attribute__((target("avx2"))) MagnitudeStats light_chunk_avx2_with(const float* g, std::size_t n, float t,
                                                                     double shift, Extra& extra) {
  const Extra before = extra;
  bool dirty = false;
  MagnitudeStats s = light_pass_avx2<shifted, squares, logs, false>(g, n, t, shift, extra, dirty);
  if (dirty) {
    extra = before;
    s = light_pass_avx2<shifted, squares, logs, true>(g, n, t, shift, extra, dirty);
  }
  if constexpr (!squares && !logs) {
    if (!std::isfinite(s.sum)) {
      extra = before;
      s = light_pass_avx2<shifted, true, false, true>(g, n, t, shift, extra, dirty);
      s.sum_sq = std::numeric_limits<double>::quiet_NaN();
    }
  }
  return s;
}
// The plain passes (no hook), as function pointers for pick().
template <bool shifted, bool squares, bool logs = false>
__attribute__((target("avx2"))) MagnitudeStats light_chunk_avx2(const float* g, std::size_t n, float t,
                                                                double shift) {
  NoExtra none;
  return light_chunk_avx2_with<shifted, squares, logs>(g, n, t, shift, none);
}
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#define GS_LIGHT_AVX2 1
#endif

// One clone set per instantiation (target_clones does not apply to templates).
GS_CPU_CLONES MagnitudeStats stats_chunk_all(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kAll>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES MagnitudeStats stats_chunk_sq(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kSq>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES MagnitudeStats stats_chunk_basic(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kBasic>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES MagnitudeStats above_chunk_all(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kAll>(g, n, t, shift);
}
GS_CPU_CLONES MagnitudeStats above_chunk_sq(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kSq>(g, n, t, shift);
}
GS_CPU_CLONES MagnitudeStats above_chunk_basic(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kBasic>(g, n, t, shift);
}

using StatsChunkFn = MagnitudeStats (*)(const float*, std::size_t, float, double);

StatsChunkFn pick(StatsFields f, bool shifted) {
#if defined(GS_LIGHT_AVX2)
  if (has_avx2()) {
    if (f.sum_log || f.sum_signed)
      return shifted ? light_chunk_avx2<true, true, true> : light_chunk_avx2<false, true, true>;
    if (f.sum_sq) return shifted ? light_chunk_avx2<true, true> : light_chunk_avx2<false, true>;
    return shifted ? light_chunk_avx2<true, false> : light_chunk_avx2<false, false>;
  }
#endif
  if (f.sum_log || f.sum_signed) return shifted ? above_chunk_all : stats_chunk_all;
  if (f.sum_sq) return shifted ? above_chunk_sq : stats_chunk_sq;
  return shifted ? above_chunk_basic : stats_chunk_basic;
}

MagnitudeStats merge_stats(const MagnitudeStats& a, const MagnitudeStats& b) { return gs::merge(a, b); }

GS_CPU_CLONES std::uint64_t count_chunk_generic(const float* g, std::size_t n, float t) {
  std::uint64_t c = 0;
#pragma omp simd reduction(+ : c)
  for (std::size_t i = 0; i < n; ++i) c += selected_above(g[i], t) ? 1u : 0u;
  return c;
}
#if defined(GS_LIGHT_AVX2)
// GCC 12 leaves the loop above scalar-speed (2 to 3 reads for a count); in intrinsics it is one
// compare pair, a movemask and a popcount per 8 floats.
__attribute__((target("avx2"))) std::uint64_t count_chunk_avx2(const float* g, std::size_t n, float t) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 tv = _mm256_set1_ps(t), fmax = _mm256_set1_ps(kFloatMax);
  std::uint64_t c = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_and_ps(_mm256_loadu_ps(g + i), absmask);
    const __m256 hit = _mm256_and_ps(_mm256_cmp_ps(x, tv, _CMP_GT_OQ), _mm256_cmp_ps(x, fmax, _CMP_LE_OQ));
    c += static_cast<unsigned>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(hit))));
  }
  for (; i < n; ++i) c += selected_above(g[i], t) ? 1u : 0u;
  return c;
}
#endif
std::uint64_t count_chunk(const float* g, std::size_t n, float t) {
#if defined(GS_LIGHT_AVX2)
  if (has_avx2()) return count_chunk_avx2(g, n, t);
#endif
  return count_chunk_generic(g, n, t);
}

GpSums gp_chunk(const float* g, std::size_t n, float t, double theta, double shift) {
  GpSums s;
  for (std::size_t i = 0; i < n; ++i) {
    if (!selected_above(g[i], t)) continue;
    const double z = theta * (static_cast<double>(std::fabs(g[i])) - shift);
    const double inv = 1.0 / (1.0 + z);
    ++s.count;
    s.sum_log1p += std::log1p(z);
    s.sum_inv += inv;
    s.sum_inv2 += inv * inv;
  }
  return s;
}

GpSums merge_gp(const GpSums& a, const GpSums& b) {
  return {a.count + b.count, a.sum_log1p + b.sum_log1p, a.sum_inv + b.sum_inv,
          a.sum_inv2 + b.sum_inv2};
}

}  // namespace

namespace detail {
MagnitudeStats stats_above_block(const float* v, std::size_t n, double threshold, double shift,
                                 StatsFields fields) {
  const float t = threshold_as_float(threshold);
  if (!(shift <= threshold)) return above_chunk_any_shift(v, n, t, shift, fields);
  return pick(fields, true)(v, n, t, shift);
}

#if defined(GS_LIGHT_AVX2)
namespace {
// The hook that packs the finite x > pack of every group (branchless: every group is stored, the
// position moved by its hit count), with the indices kept in a vector moved by 8 per group.
template <bool branchless>
struct PackAbove {
  __m256 pv;
  __m256i ix;
  std::int32_t* out_idx;
  float* out_val;
  std::size_t at;
  template <bool checked>
  __attribute__((target("avx2"), always_inline)) void operator()(std::bool_constant<checked>, __m256 raw,
                                                                  __m256 x, __m256 finite) {
    __m256 hit = _mm256_cmp_ps(x, pv, _CMP_GT_OQ);
    if constexpr (checked) hit = _mm256_and_ps(hit, finite);
    const int m = _mm256_movemask_ps(hit);
    if (branchless || m) at = pack_group8(raw, ix, m, out_idx, out_val, at);
    ix = _mm256_add_epi32(ix, _mm256_set1_epi32(8));
  }
};
// shifted: statistics of |g| > t shifted (stats_above's); else of every |g| (stats's).
template <bool shifted, bool squares, bool branchless>
__attribute__((target("avx2"))) MagnitudeStats stats_and_pack_avx2(
    const float* g, std::size_t begin, std::size_t end, float t, double shift, float pack,
    std::int32_t* out_idx, float* out_val, std::size_t& out) {
  PackAbove<branchless> hook{_mm256_set1_ps(pack),
                             _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(begin)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                             out_idx, out_val, out};
  const std::size_t n = end - begin;
  const MagnitudeStats s = light_chunk_avx2_with<shifted, squares, false>(g + begin, n, t, shift, hook);
  const std::size_t full = n - n % 8;  // the groups the hook saw; the rest by the scalar compaction
  out = compact_range(g, static_cast<const std::int32_t*>(nullptr), begin + full, end, pack,
                      out_idx, out_val, hook.at);
  return s;
}
}  // namespace
#endif

namespace {
template <bool shifted>
MagnitudeStats stats_and_pack(const float* g, std::size_t begin, std::size_t end, double threshold,
                              double shift, StatsFields f, float pack, std::int32_t* out_idx,
                              float* out_val, std::size_t& out, bool dense_hits) {
#if defined(GS_LIGHT_AVX2)
  if (has_avx2() && !f.sum_log && !f.sum_signed && (!shifted || shift <= threshold) && out_val) {
    const float t = shifted ? threshold_as_float(threshold) : 0.0f;
    const auto run = f.sum_sq ? (dense_hits ? stats_and_pack_avx2<shifted, true, true> : stats_and_pack_avx2<shifted, true, false>)
                              : (dense_hits ? stats_and_pack_avx2<shifted, false, true> : stats_and_pack_avx2<shifted, false, false>);
    return run(g, begin, end, t, shift, pack, out_idx, out_val, out);
  }
#endif
  const MagnitudeStats s = shifted ? stats_above_block(g + begin, end - begin, threshold, shift, f)
                                   : pick(f, false)(g + begin, end - begin, 0.0f, 0.0);
  out = compact_range(g, static_cast<const std::int32_t*>(nullptr), begin, end, pack, out_idx, out_val, out);
  return s;
}
}  // namespace

MagnitudeStats stats_above_and_compact(const float* g, std::size_t begin, std::size_t end,
                                       double threshold, double shift, StatsFields f, float pack,
                                       std::int32_t* out_idx, float* out_val, std::size_t& out,
                                       bool dense_hits) {
  return stats_and_pack<true>(g, begin, end, threshold, shift, f, pack, out_idx, out_val, out, dense_hits);
}
MagnitudeStats stats_and_compact(const float* g, std::size_t begin, std::size_t end, StatsFields f,
                                 float pack, std::int32_t* out_idx, float* out_val, std::size_t& out,
                                 bool dense_hits) {
  return stats_and_pack<false>(g, begin, end, 0.0, 0.0, f, pack, out_idx, out_val, out, dense_hits);
}
}  // namespace detail

int threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

double sum(std::span<const float> g) {
  return detail::reduce_chunks(g, 0.0, sum_chunk, [](double a, double b) { return a + b; });
}

MagnitudeStats stats(std::span<const float> g, StatsFields fields) {
  const StatsChunkFn fn = pick(fields, false);
  return detail::reduce_chunks(
      g, MagnitudeStats{}, [fn](const float* p, std::size_t n) { return fn(p, n, 0.0f, 0.0); },
      merge_stats);
}

MagnitudeStats stats_above(std::span<const float> g, double threshold, double shift,
                           StatsFields fields) {
  check_threshold(threshold, "stats_above");
  if (!std::isfinite(shift)) throw gs::Error("stats_above: shift must be finite");
  const float t = threshold_as_float(threshold);
  if (!(shift <= threshold)) {
    return detail::reduce_chunks(
        g, MagnitudeStats{},
        [t, shift, fields](const float* p, std::size_t n) { return above_chunk_any_shift(p, n, t, shift, fields); },
        merge_stats);
  }
  const StatsChunkFn fn = pick(fields, true);
  return detail::reduce_chunks(
      g, MagnitudeStats{}, [fn, t, shift](const float* p, std::size_t n) { return fn(p, n, t, shift); },
      merge_stats);
}

std::uint64_t count_above(std::span<const float> g, double threshold) {
  check_threshold(threshold, "count_above");
  const float t = threshold_as_float(threshold);
  return detail::reduce_chunks(
      g, std::uint64_t{0}, [t](const float* p, std::size_t n) { return count_chunk(p, n, t); },
      [](std::uint64_t a, std::uint64_t b) { return a + b; });
}

GpSums gp_sums(std::span<const float> g, double theta, double threshold, double shift) {
  check_threshold(threshold, "gp_sums");
  if (!std::isfinite(theta) || !std::isfinite(shift))
    throw gs::Error("gp_sums: theta and shift must be finite");
  const float t = threshold_as_float(threshold);
  return detail::reduce_chunks(
      g, GpSums{},
      [=](const float* p, std::size_t n) { return gp_chunk(p, n, t, theta, shift); }, merge_gp);
}

LogHistogram log_histogram(std::span<const float> g, double lo, double hi, int bins) {
  check_log_histogram_args(lo, hi, bins);
  const double log_lo = std::log(lo);
  const double bins_per_log = bins / (std::log(hi) - log_lo);
  // Slots: [0] below, [1..bins] bins, [bins+1] above, [bins+2] zeros, [bins+3] non-finite.
  const std::size_t slots = static_cast<std::size_t>(bins) + 4;
  std::vector<std::uint64_t> total(slots, 0);
  const std::size_t chunks = detail::chunk_count(g.size());
#pragma omp parallel if (chunks > 1)
  {
    std::vector<std::uint64_t> local(slots, 0);
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks); ++c) {
      const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
      const std::size_t end = std::min(g.size(), begin + kChunk);
      for (std::size_t i = begin; i < end; ++i) {
        const float x = std::fabs(g[i]);
        if (!(x <= kFloatMax)) {
          ++local[slots - 1];
        } else if (x == 0.0f) {
          ++local[slots - 2];
        } else {
          const long long b = kernels::detail::log_bin(x, log_lo, bins_per_log, bins, lo, hi);
          ++local[static_cast<std::size_t>(b + 1)];
        }
      }
    }
#pragma omp critical
    for (std::size_t s = 0; s < slots; ++s) total[s] += local[s];  // integer: order-free
  }
  LogHistogram h;
  h.lo = lo;
  h.hi = hi;
  h.below = total[0];
  h.counts.assign(total.begin() + 1, total.begin() + 1 + bins);
  h.above = total[static_cast<std::size_t>(bins) + 1];
  h.zeros = total[slots - 2];
  h.nonfinite = total[slots - 1];
  return h;
}

}  // namespace gs::kernels::cpu
