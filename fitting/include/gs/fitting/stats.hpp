#pragma once
// Sufficient statistics of x = |g| from one fused pass. Everything the closed-form estimators need
// (n, sum x, sum x^2, sum ln x, min, max) plus the counts of what was left out: exact zeros (no ln)
// and non-finite values. Shared by the CPU and CUDA backends (kernels/), so add/merge are GS_HD.
#include <cmath>
#include <cstdint>
#include <limits>

#include "gs/base/hostdevice.hpp"

namespace gs::fitting {

struct MagnitudeStats {
  std::uint64_t count = 0;      // finite, non-zero values that entered the sums
  std::uint64_t zeros = 0;      // exact zeros (excluded: ln 0 = -inf)
  std::uint64_t nonfinite = 0;  // NaN or +-Inf (excluded)
  double sum = 0.0;             // sum x
  double sum_sq = 0.0;          // sum x^2
  double sum_log = 0.0;         // sum ln x
  double sum_signed = 0.0;      // sum g over the same elements (GaussianKSGD's mean of signed g)
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();

  GS_HD std::uint64_t total() const { return count + zeros + nonfinite; }
  GS_HD std::uint64_t excluded() const { return zeros + nonfinite; }
  GS_HD double mean() const { return count ? sum / double(count) : 0.0; }
  GS_HD double mean_log() const { return count ? sum_log / double(count) : 0.0; }
  // Population variance (divisor n), clamped at 0 against rounding.
  GS_HD double variance() const {
    if (count == 0) return 0.0;
    const double m = mean();
    const double v = sum_sq / double(count) - m * m;
    return v > 0.0 ? v : 0.0;
  }
};

// Adds one element g (signed; x = |g|) to s. For shifted tail statistics pass x - shift.
GS_HD inline void add(MagnitudeStats& s, double g) {
  const double x = g < 0.0 ? -g : g;
  if (!(x - x == 0.0)) {  // NaN or Inf, written without <cmath> so it runs on the device
    ++s.nonfinite;
  } else if (x == 0.0) {
    ++s.zeros;
  } else {
    ++s.count;
    s.sum += x;
    s.sum_sq += x * x;
    s.sum_log += ::log(x);
    s.sum_signed += g;
    s.min = x < s.min ? x : s.min;
    s.max = x > s.max ? x : s.max;
  }
}

GS_HD inline MagnitudeStats merge(const MagnitudeStats& a, const MagnitudeStats& b) {
  MagnitudeStats r;
  r.count = a.count + b.count;
  r.zeros = a.zeros + b.zeros;
  r.nonfinite = a.nonfinite + b.nonfinite;
  r.sum = a.sum + b.sum;
  r.sum_sq = a.sum_sq + b.sum_sq;
  r.sum_log = a.sum_log + b.sum_log;
  r.sum_signed = a.sum_signed + b.sum_signed;
  r.min = a.min < b.min ? a.min : b.min;
  r.max = a.max > b.max ? a.max : b.max;
  return r;
}

}  // namespace gs::fitting
