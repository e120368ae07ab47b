#pragma once
// Per-element formulas shared by the CPU and CUDA backends (GS_HD: written once, compiled by g++
// and nvcc), so both backends select, bin and sample exactly the same elements.
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gs/base/error.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/base/mix64.hpp"
#include "gs/base/hostdevice.hpp"

namespace gs::kernels::detail {

// Bit pattern of |g| as an unsigned key: for finite values key order is magnitude order, and
// every key >= kNonfiniteKey is +-Inf or NaN.
inline constexpr std::uint32_t kNonfiniteKey = 0x7f800000u;

GS_HD inline std::uint32_t magnitude_key(float g) {
  std::uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(g);
#else
  std::memcpy(&bits, &g, sizeof bits);
#endif
  return bits & 0x7fffffffu;
}

GS_HD inline float key_to_float(std::uint32_t key) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(key);
#else
  float f;
  std::memcpy(&f, &key, sizeof f);
  return f;
#endif
}

// The float f with (float x > f) <=> (double(x) > t) for every float x: the largest float <= t.
// Lets the passes compare in float (vectorizable) yet honour a double threshold exactly.
GS_HD inline float threshold_as_float(double t) {
  const double big = 3.4028234663852886e38;  // FLT_MAX
  if (t >= big) return 3.4028234663852886e38f;
  if (t < -big) return -3.4028234663852886e38f;
  float f = static_cast<float>(t);
  if (static_cast<double>(f) > t) {
    // Step down one float (t is finite here, so f is too).
    std::uint32_t bits;
#if defined(__CUDA_ARCH__)
    bits = __float_as_uint(f);
#else
    std::memcpy(&bits, &f, sizeof bits);
#endif
    if (f > 0.0f)
      --bits;
    else if (f < 0.0f)
      ++bits;
    else
      bits = 0x80000001u;  // just below zero
#if defined(__CUDA_ARCH__)
    f = __uint_as_float(bits);
#else
    std::memcpy(&f, &bits, sizeof f);
#endif
  }
  return f;
}

// The selection predicate of every "above threshold" pass: finite and |g| > t (t from
// threshold_as_float). NaN fails both comparisons; Inf fails the second.
GS_HD inline bool selected_above(float g, float t) {
  const float x = g < 0.0f ? -g : g;
  return x > t && x <= 3.40282347e38f;  // FLT_MAX
}

// ln x for finite x > 0 (float input) as ln x = e*ln2 + p: exponent and mantissa split, mantissa
// folded into [sqrt(1/2), sqrt(2)), then p = ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, as an
// odd series up to s^9 in float (|p| < 0.35). Branch-free apart from selects, so it vectorizes on
// the CPU; a CPU loop can sum e exactly in integer lanes and p in double.
struct LogParts {
  int e;
  float p;
};
GS_HD inline LogParts fast_log_parts(float x) {
  const bool tiny = x < 1.17549435e-38f;  // subnormal: scale into the normal range first
  const float xs = tiny ? x * 16777216.0f : x;
  std::uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(xs);
#else
  std::memcpy(&bits, &xs, sizeof bits);
#endif
  int e = static_cast<int>((bits >> 23) & 0xffu) - 127;
  const std::uint32_t mbits = (bits & 0x007fffffu) | 0x3f800000u;
  float m;
#if defined(__CUDA_ARCH__)
  m = __uint_as_float(mbits);
#else
  std::memcpy(&m, &mbits, sizeof m);
#endif
  const bool fold = m > 1.41421356f;
  m = fold ? m * 0.5f : m;
  e = fold ? e + 1 : e;
  e = tiny ? e - 24 : e;
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  return {e, s * (2.0f + s2 * (0.666666667f + s2 * (0.4f + s2 * (0.285714286f + s2 * 0.222222222f))))};
}

// ln x in double from fast_log_parts: absolute error below 1e-7 for every finite positive float
// (tested); e*ln2 is exact enough in double.
GS_HD inline double fast_log(float x) {
  const LogParts l = fast_log_parts(x);
  return static_cast<double>(l.e) * 0.69314718055994531 + static_cast<double>(l.p);
}

// add() of gs/fitting/stats.hpp with fast_log for ln x: the fused stats pass of both backends.
GS_HD inline void add_fast(fitting::MagnitudeStats& s, float g) {
  const float x = g < 0.0f ? -g : g;
  if (!(x - x == 0.0f)) {
    ++s.nonfinite;
  } else if (x == 0.0f) {
    ++s.zeros;
  } else {
    const double xd = x;
    ++s.count;
    s.sum += xd;
    s.sum_sq += xd * xd;
    s.sum_log += fast_log(x);
    s.sum_signed += static_cast<double>(g);
    s.min = xd < s.min ? xd : s.min;
    s.max = xd > s.max ? xd : s.max;
  }
}

// The hash of element i under seed (gs::mix64), so CPU and CUDA draw the same elements.
GS_HD inline std::uint64_t element_hash(std::uint64_t seed, std::uint64_t i) {
  return mix64(mix64(seed) ^ (i * 0xd1b54a32d192ed03ull));
}

// Uniform integer in [0, n) from a 64-bit hash (multiply-high; bias below n / 2^64).
GS_HD inline std::uint64_t hash_to_range(std::uint64_t h, std::uint64_t n) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(h, n);
#else
  // High 64 bits of h*n from 32-bit halves (portable, no 128-bit type).
  const std::uint64_t hl = h & 0xffffffffu, hh = h >> 32, nl = n & 0xffffffffu, nh = n >> 32;
  const std::uint64_t ll = hl * nl, lh = hl * nh, hl2 = hh * nl, hh2 = hh * nh;
  const std::uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl2 & 0xffffffffu);
  return hh2 + (lh >> 32) + (hl2 >> 32) + (mid >> 32);
#endif
}

// Bin of x in a log histogram: -1 below lo, bins at or above hi; x finite and > 0.
GS_HD inline long long log_bin(double x, double log_lo, double bins_per_log, int bins, double lo, double hi) {
  if (x < lo) return -1;
  if (x >= hi) return bins;
  long long b = static_cast<long long>((::log(x) - log_lo) * bins_per_log);
  b = b < 0 ? 0 : b;
  return b >= bins ? bins - 1 : b;
}

// sorted_sample's subsample, on every backend and streamed (gs::analyzer::StreamedPasses): the
// max_points elements of smallest element_hash(seed, global index), found through a filter that
// keeps each finite non-zero element with probability p (a few standard deviations above the need,
// so about 1.1 max_points survive) and retries with 4p when too few did.
inline double sample_keep_probability(std::uint64_t max_points, std::uint64_t available) {
  const double m = static_cast<double>(max_points);
  return std::min(1.0, (m + 6.0 * std::sqrt(m) + 64.0) / static_cast<double>(available));
}
// The hash bound of keep probability p: hashes below it pass.
inline std::uint64_t sample_hash_cutoff(double p) {
  return p >= 1.0 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(p * 18446744073709551616.0);
}

// The floats of x in ascending order, widened to double: exactly std::sort's result on the widened
// values, by a radix sort on their bits (cpu/sort.cpp). x must hold finite floats > 0 (their bit
// patterns then order like them); it is reordered, and the sort takes one scratch buffer of its size.
std::vector<double> sorted_widened(std::vector<float>& x);

// An element that passed the filter, and the subsample the kept ones give: the x of the
// max_points smallest (hash, index), ascending. kept is reordered.
struct HashKept {
  std::uint64_t hash;
  std::uint64_t index;
  float x;
};
inline std::vector<double> smallest_hash_values(std::vector<HashKept>& kept, std::uint64_t max_points) {
  const auto by_hash = [](const HashKept& a, const HashKept& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.index < b.index;
  };
  std::nth_element(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(max_points - 1), kept.end(), by_hash);
  std::vector<float> x(max_points);
  for (std::uint64_t k = 0; k < max_points; ++k) x[k] = kept[k].x;
  return sorted_widened(x);
}

// sorted_sample's error when its hash filter, keeping everything (p = 1), returns fewer finite
// non-zero values than its counting pass saw: the vector changed while it was read. Both backends
// throw it rather than retry forever.
inline gs::Error sample_count_changed(std::uint64_t counted, std::uint64_t kept) {
  return gs::Error("sorted_sample: the counting pass saw " + std::to_string(counted) +
                   " finite non-zero values but the sampling pass kept " + std::to_string(kept) +
                   " with every element allowed; was the vector modified while it was read?");
}

}  // namespace gs::kernels::detail
