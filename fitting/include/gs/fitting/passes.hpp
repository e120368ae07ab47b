#pragma once
// MagnitudePasses: every read of the data that estimators, thresholds and goodness-of-fit tests
// need, as one interface over a vector g (x = |g|). fitting/ holds the math and calls these;
// kernels/ implements them once per backend (CPU, CUDA) over host or device memory, which keeps
// fitting free of any backend. Counting these calls is counting passes over the data.
#include <cstdint>
#include <vector>

#include "gs/fitting/stats.hpp"
#include "gs/base/hostdevice.hpp"

namespace gs::fitting {

// Sums the generalized-Pareto profile likelihood needs for one trial theta = xi/sigma over
// y = x - shift, for the elements with x > threshold (Grimshaw 1993).
struct GpSums {
  std::uint64_t count = 0;
  double sum_log1p = 0.0;  // sum ln(1 + theta*y)
  double sum_inv = 0.0;    // sum 1/(1 + theta*y)
  double sum_inv2 = 0.0;   // sum 1/(1 + theta*y)^2
};

// Which sums a statistics pass must fill besides the ones every pass fills (count, zeros,
// nonfinite, sum, min, max). A backend may skip the others (no ln x, no square per element), which
// lets the pass run at memory speed; the skipped fields are then unspecified (the CPU backend
// leaves them NaN, so a misuse shows). With none of them asked for, the sum may be accumulated in
// float over blocks of at most 8 terms per lane and in double across blocks: its relative error
// is then at most 8 * 2^-24 (about 5e-7; the terms are >= 0 when shift <= threshold), far below
// the sampling error of any fit made from it. The full passes keep double sums throughout.
struct StatsFields {
  bool sum_sq = false;
  bool sum_log = false;
  bool sum_signed = false;
  static constexpr StatsFields all() { return {true, true, true}; }
};

class MagnitudePasses {
 public:
  virtual ~MagnitudePasses() = default;

  // Number of elements of g (zeros and non-finite included).
  virtual std::uint64_t size() const = 0;

  // Statistics of x over all elements: count, zeros, non-finite, sums, min, max.
  virtual MagnitudeStats stats() = 0;

  // Statistics of y = x - shift over the finite elements with x > threshold (threshold >= 0).
  // zeros/nonfinite of the result count nothing; y > 0 whenever shift <= threshold.
  virtual MagnitudeStats stats_above(double threshold, double shift) = 0;

  // stats() / stats_above() filling only what `fields` asks for (see StatsFields). The defaults
  // run the full passes, so a backend that has no lighter pass stays correct.
  virtual MagnitudeStats stats_light(StatsFields fields) {
    (void)fields;
    return stats();
  }
  virtual MagnitudeStats stats_above_light(double threshold, double shift, StatsFields fields) {
    (void)fields;
    return stats_above(threshold, shift);
  }

  // Count of finite elements with x > threshold.
  virtual std::uint64_t count_above(double threshold) = 0;

  // See GpSums. theta may be negative (bounded xi < 0 tails) with 1 + theta*y > 0 on the data.
  virtual GpSums gp_sums(double theta, double threshold, double shift) = 0;

  // Finite non-zero x in ascending order: all of them when there are at most max_points, else a
  // uniform random subsample (without replacement) of max_points drawn with seed, sorted.
  // *subsampled says which.
  virtual std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) = 0;

  // The k-th largest finite x (1-based: k = 1 is the maximum); exact. Requires 1 <= k <= count.
  virtual double kth_largest(std::uint64_t k) = 0;

  // m values of x drawn uniformly at random with replacement over all n elements (DGC's sample;
  // non-finite values come back as they are, zeros as 0).
  virtual std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) = 0;

  // x of `lines` runs of `line_length` consecutive elements spread evenly over g (run l starts at
  // spread_line_start(n, lines, line_length, l)), in order; all of x when n < lines * line_length.
  // Non-finite values come back as they are. Scattered reads of whole cache lines, not a pass.
  virtual std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t line_length) = 0;
};

// Where run l of a spread sample starts: evenly spaced, aligned to the run length.
GS_HD inline std::uint64_t spread_line_start(std::uint64_t n, std::uint64_t lines, std::uint64_t line_length,
                                             std::uint64_t l) {
  return l * (n / line_length) / lines * line_length;
}

}  // namespace gs::fitting
