// CPU backend: the reductions (read pass, fused stats, stats above a threshold, counts, GP sums,
// log histogram). Each is one pass over the data.
#include <algorithm>
#include <cmath>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include <limits>
#include <type_traits>

#include "compact.hpp"
#include "light_avx2.hpp"
#include "parallel.hpp"
#include "reduce.hpp"
#include "gs/base/error.hpp"
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
[[gnu::always_inline]] inline fitting::MagnitudeStats stats_chunk_impl(const float* g, std::size_t n, float t,
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
    if constexpr (shifted)
      use = (key > kernels::detail::magnitude_key(t)) & (key < kernels::detail::kNonfiniteKey);
    else
      use = (key != 0u) & (key < kernels::detail::kNonfiniteKey);
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
  fitting::MagnitudeStats s;
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
fitting::MagnitudeStats above_chunk_any_shift(const float* g, std::size_t n, float t, double shift,
                                              fitting::StatsFields f) {
  fitting::MagnitudeStats s;
  for (std::size_t i = 0; i < n; ++i)
    if (kernels::detail::selected_above(g[i], t)) gs::fitting::add(s, static_cast<double>(std::fabs(g[i])) - shift);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (!f.sum_sq && !f.sum_log && !f.sum_signed) s.sum_sq = kNaN;
  if (!f.sum_log && !f.sum_signed) s.sum_log = s.sum_signed = kNaN;
  return s;
}

#if defined(GS_LIGHT_AVX2)
using detail::has_avx2;
using detail::light_chunk_avx2;
#endif

// One clone set per instantiation (target_clones does not apply to templates).
GS_CPU_CLONES fitting::MagnitudeStats stats_chunk_all(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kAll>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES fitting::MagnitudeStats stats_chunk_sq(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kSq>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES fitting::MagnitudeStats stats_chunk_basic(const float* g, std::size_t n, float, double) {
  return stats_chunk_impl<false, kBasic>(g, n, 0.0f, 0.0);
}
GS_CPU_CLONES fitting::MagnitudeStats above_chunk_all(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kAll>(g, n, t, shift);
}
GS_CPU_CLONES fitting::MagnitudeStats above_chunk_sq(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kSq>(g, n, t, shift);
}
GS_CPU_CLONES fitting::MagnitudeStats above_chunk_basic(const float* g, std::size_t n, float t, double shift) {
  return stats_chunk_impl<true, kBasic>(g, n, t, shift);
}

using StatsChunkFn = fitting::MagnitudeStats (*)(const float*, std::size_t, float, double);

StatsChunkFn pick(fitting::StatsFields f, bool shifted) {
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

fitting::MagnitudeStats merge_stats(const fitting::MagnitudeStats& a, const fitting::MagnitudeStats& b) {
  return gs::fitting::merge(a, b);
}

GS_CPU_CLONES std::uint64_t count_chunk_generic(const float* g, std::size_t n, float t) {
  std::uint64_t c = 0;
#pragma omp simd reduction(+ : c)
  for (std::size_t i = 0; i < n; ++i) c += selected_above(g[i], t) ? 1u : 0u;
  return c;
}
#if defined(GS_LIGHT_AVX2)
// GCC 12 leaves the loop above at scalar speed (docs/BENCHMARKS.md, "Single passes": count_above);
// in intrinsics it is one compare pair, a movemask and a popcount per 8 floats.
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

// The Grimshaw sums of one element; the scalar pass and the vector pass's tail.
inline void gp_add(fitting::GpSums& s, float v, double theta, double shift) {
  const double z = theta * (static_cast<double>(std::fabs(v)) - shift);
  const double inv = 1.0 / (1.0 + z);
  ++s.count;
  s.sum_log1p += std::log1p(z);
  s.sum_inv += inv;
  s.sum_inv2 += inv * inv;
}

fitting::GpSums gp_chunk_scalar(const float* g, std::size_t n, float t, double theta, double shift) {
  fitting::GpSums s;
  for (std::size_t i = 0; i < n; ++i)
    if (selected_above(g[i], t)) gp_add(s, g[i], theta, shift);
  return s;
}

#if defined(GS_LIGHT_AVX2) && defined(GS_HAVE_LIBMVEC)
// ln(1 + z) on 4 doubles from glibc's libmvec (x86_64, glibc >= 2.35; its AVX2 variant under the
// vector-function ABI name). A pass with scalar log1p costs several of the vector one (docs/
// BENCHMARKS.md, "Analysis of one ResNet-50 step against one sort of |g|"), and the fits' profile
// search runs gp_sums several times over every value above the threshold.
extern "C" __attribute__((target("avx2"))) __m256d _ZGVdN4v_log1p(__m256d z);

__attribute__((target("avx2"))) inline double lane_total(__m256d v) {
  alignas(32) double a[4];
  _mm256_store_pd(a, v);
  return (a[0] + a[1]) + (a[2] + a[3]);
}

// gp_chunk_scalar 4 elements at a time with the same per-element formulas, except that libmvec's
// log1p is not glibc's scalar one (within a few ulp of it; 2 ulp at most over z in (-1, 1e8] as
// measured on glibc 2.36) and the sums run per lane: they differ from the scalar pass's in the
// last digits, by at most 1e-12 relative (tests/kernels/test_gp_sums.cpp holds sum_log1p,
// sum_inv and sum_inv2 to that). Lanes are added in a fixed order, so the result depends only on
// the chunk, not on the thread count. Groups of 4 with no selected element are skipped: a high
// threshold costs little more than a compare per group.
__attribute__((target("avx2"))) fitting::GpSums gp_chunk_avx2(const float* g, std::size_t n, float t, double theta,
                                                              double shift) {
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 tv = _mm_set1_ps(t), fmax = _mm_set1_ps(kFloatMax);
  const __m256d thetav = _mm256_set1_pd(theta), shiftv = _mm256_set1_pd(shift);
  const __m256d one = _mm256_set1_pd(1.0);
  __m256d sum_log1p = _mm256_setzero_pd(), sum_inv = _mm256_setzero_pd(), sum_inv2 = _mm256_setzero_pd();
  std::uint64_t count = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 x = _mm_and_ps(_mm_loadu_ps(g + i), absmask);
    const __m128 hit = _mm_and_ps(_mm_cmpgt_ps(x, tv), _mm_cmple_ps(x, fmax));
    const int bits = _mm_movemask_ps(hit);
    if (bits == 0) continue;
    count += static_cast<unsigned>(__builtin_popcount(static_cast<unsigned>(bits)));
    const __m256d use = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(hit)));
    // z = 0 in the lanes not used: log1p(0) = 0 adds nothing, their 1/(1+z) is masked out.
    const __m256d z = _mm256_and_pd(_mm256_mul_pd(thetav, _mm256_sub_pd(_mm256_cvtps_pd(x), shiftv)), use);
    const __m256d inv = _mm256_and_pd(_mm256_div_pd(one, _mm256_add_pd(one, z)), use);
    sum_log1p = _mm256_add_pd(sum_log1p, _ZGVdN4v_log1p(z));
    sum_inv = _mm256_add_pd(sum_inv, inv);
    sum_inv2 = _mm256_add_pd(sum_inv2, _mm256_mul_pd(inv, inv));
  }
  fitting::GpSums tail;
  for (; i < n; ++i)
    if (selected_above(g[i], t)) gp_add(tail, g[i], theta, shift);
  return {count + tail.count, lane_total(sum_log1p) + tail.sum_log1p, lane_total(sum_inv) + tail.sum_inv,
          lane_total(sum_inv2) + tail.sum_inv2};
}
#endif

fitting::GpSums merge_gp(const fitting::GpSums& a, const fitting::GpSums& b) {
  return {a.count + b.count, a.sum_log1p + b.sum_log1p, a.sum_inv + b.sum_inv, a.sum_inv2 + b.sum_inv2};
}

}  // namespace

namespace detail {
fitting::MagnitudeStats stats_above_block(const float* v, std::size_t n, double threshold, double shift,
                                          fitting::StatsFields fields) {
  const float t = threshold_as_float(threshold);
  if (!(shift <= threshold)) return above_chunk_any_shift(v, n, t, shift, fields);
  return pick(fields, true)(v, n, t, shift);
}
fitting::MagnitudeStats stats_block(const float* v, std::size_t n, fitting::StatsFields fields) {
  return pick(fields, false)(v, n, 0.0f, 0.0);
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

fitting::MagnitudeStats stats(std::span<const float> g, fitting::StatsFields fields) {
  const StatsChunkFn fn = pick(fields, false);
  return detail::reduce_chunks(
      g, fitting::MagnitudeStats{}, [fn](const float* p, std::size_t n) { return fn(p, n, 0.0f, 0.0); }, merge_stats);
}

fitting::MagnitudeStats stats_as_written(std::span<const float> out, fitting::StatsFields fields,
                                         const std::function<void(std::size_t, std::size_t)>& fill) {
  const StatsChunkFn fn = pick(fields, false);
  const float* base = out.data();
  return detail::reduce_chunks(
      out, fitting::MagnitudeStats{},
      [&](const float* p, std::size_t n) {
        const auto begin = static_cast<std::size_t>(p - base);
        fill(begin, begin + n);
        return fn(p, n, 0.0f, 0.0);
      },
      merge_stats);
}

fitting::MagnitudeStats stats_above(std::span<const float> g, double threshold, double shift,
                                    fitting::StatsFields fields) {
  check_threshold(threshold, "stats_above");
  if (!std::isfinite(shift)) throw gs::Error("stats_above: shift must be finite");
  const float t = threshold_as_float(threshold);
  if (!(shift <= threshold)) {
    return detail::reduce_chunks(
        g, fitting::MagnitudeStats{},
        [t, shift, fields](const float* p, std::size_t n) { return above_chunk_any_shift(p, n, t, shift, fields); },
        merge_stats);
  }
  const StatsChunkFn fn = pick(fields, true);
  return detail::reduce_chunks(
      g, fitting::MagnitudeStats{}, [fn, t, shift](const float* p, std::size_t n) { return fn(p, n, t, shift); },
      merge_stats);
}

std::uint64_t count_above(std::span<const float> g, double threshold) {
  check_threshold(threshold, "count_above");
  const float t = threshold_as_float(threshold);
  return detail::reduce_chunks(
      g, std::uint64_t{0}, [t](const float* p, std::size_t n) { return count_chunk(p, n, t); },
      [](std::uint64_t a, std::uint64_t b) { return a + b; });
}

namespace {
using GpChunkFn = fitting::GpSums (*)(const float*, std::size_t, float, double, double);

fitting::GpSums gp_sums_with(GpChunkFn chunk, std::span<const float> g, double theta, double threshold, double shift) {
  check_threshold(threshold, "gp_sums");
  if (!std::isfinite(theta) || !std::isfinite(shift)) throw gs::Error("gp_sums: theta and shift must be finite");
  const float t = threshold_as_float(threshold);
  return detail::reduce_chunks(
      g, fitting::GpSums{}, [=](const float* p, std::size_t n) { return chunk(p, n, t, theta, shift); }, merge_gp);
}
}  // namespace

bool detail::gp_sums_vectorized() {
#if defined(GS_LIGHT_AVX2) && defined(GS_HAVE_LIBMVEC)
  return has_avx2();
#else
  return false;
#endif
}

fitting::GpSums detail::gp_sums_scalar(std::span<const float> g, double theta, double threshold, double shift) {
  return gp_sums_with(gp_chunk_scalar, g, theta, threshold, shift);
}

fitting::GpSums gp_sums(std::span<const float> g, double theta, double threshold, double shift) {
#if defined(GS_LIGHT_AVX2) && defined(GS_HAVE_LIBMVEC)
  if (has_avx2()) return gp_sums_with(gp_chunk_avx2, g, theta, threshold, shift);
#endif
  return gp_sums_with(gp_chunk_scalar, g, theta, threshold, shift);
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
  return log_histogram_from_slots(lo, hi, total);
}

}  // namespace gs::kernels::cpu
