#pragma once
// The AVX2 statistics pass of the CPU backend (cpu/reduce.cpp's passes and the fused
// statistics-plus-compaction of cpu/fused.cpp): one chunk of |g| in 8-lane groups, with a hook per
// group. Internal to kernels/.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "compact.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/kernels/elementwise.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define GS_LIGHT_AVX2 1

namespace gs::kernels::cpu::detail {

inline constexpr float kFloatMax = std::numeric_limits<float>::max();
using kernels::detail::fast_log_parts;

// fast_log_parts (gs/kernels/elementwise.hpp) on 8 lanes, the same operations in the same order:
// x > 0 finite; e in integer lanes, p in float lanes.
__attribute__((target("avx2"))) inline void log_parts_avx2(__m256 x, __m256i& e, __m256& p) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(16777216.0f)), tiny);
  const __m256i bits = _mm256_castps_si256(xs);
  e = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xff)), _mm256_set1_epi32(127));
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
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
  __attribute__((target("avx2"), always_inline)) void operator()(std::bool_constant<checked>, __m256, __m256,
                                                                 __m256) const {}
};
__attribute__((target("avx2"))) inline std::uint64_t lane_total(__m256i v) {
  alignas(32) std::uint32_t a[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), v);
  std::uint64_t s = 0;
  for (std::uint32_t x : a) s += x;
  return s;
}
template <bool shifted, bool squares, bool logs, bool checked, class Extra>
__attribute__((target("avx2"))) fitting::MagnitudeStats light_pass_avx2(const float* g, std::size_t n, float t,
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
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
  __m256i kmn = none_min, kmx = _mm256_setzero_si256();
  __m256i esum = _mm256_setzero_si256();  // |e| <= 150 per element: no overflow within a chunk
  __m256i used = _mm256_setzero_si256(), zero_lanes = _mm256_setzero_si256(), finite_lanes = _mm256_setzero_si256();
  __m256d p0 = _mm256_setzero_pd(), p1 = _mm256_setzero_pd(), g0 = _mm256_setzero_pd(), g1 = _mm256_setzero_pd();
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
        zero_lanes =
            _mm256_sub_epi32(zero_lanes, _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ)));
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
  fitting::MagnitudeStats s;
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
__attribute__((target("avx2"))) fitting::MagnitudeStats light_chunk_avx2_with(const float* g, std::size_t n, float t,
                                                                              double shift, Extra& extra) {
  const Extra before = extra;
  bool dirty = false;
  fitting::MagnitudeStats s = light_pass_avx2<shifted, squares, logs, false>(g, n, t, shift, extra, dirty);
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
__attribute__((target("avx2"))) fitting::MagnitudeStats light_chunk_avx2(const float* g, std::size_t n, float t,
                                                                         double shift) {
  NoExtra none;
  return light_chunk_avx2_with<shifted, squares, logs>(g, n, t, shift, none);
}

}  // namespace gs::kernels::cpu::detail
#endif
