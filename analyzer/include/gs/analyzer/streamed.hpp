#pragma once
// The whole model in bounded memory: gs::MagnitudePasses over a vector made of segments (a step's
// layers, concatenated in order) that are read one at a time, so a pass never holds more than one
// segment besides what the source keeps. Every pass visits the segments in order and merges what
// the CPU backend computes on each:
//   - counts, min, max, exact top-k thresholds (kth_largest: three radix digits of the magnitude
//     bits, 11 + 10 + 10, each a histogram merged over the segments), the KS/AD sample (the same
//     elements the CPU backend draws: those of smallest element_hash(seed, global index)), DGC's
//     random sample and the spread sample are equal bit for bit to the in-memory path's;
//   - sums (moments, ln x, the generalized Pareto's) are merged per segment instead of per 64 Ki
//     chunk, so they differ from the in-memory path's by rounding only (relative 1e-12 on the
//     test vectors; tests/analyzer/test_streamed.cpp).
#include <cstdint>
#include <span>
#include <vector>

#include "gs/fitting/passes.hpp"

namespace gs::analyzer {

class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  virtual std::size_t count() const = 0;
  virtual std::uint64_t size(std::size_t segment) const = 0;
  // The segment's values: held by the source, or read into scratch (resized as needed). Valid
  // until scratch changes. May be called from several threads, each with its own scratch.
  virtual std::span<const float> get(std::size_t segment, std::vector<float>& scratch) const = 0;
};

class StreamedPasses final : public fitting::MagnitudePasses {
 public:
  explicit StreamedPasses(const SegmentSource& source);
  std::uint64_t size() const override { return n_; }
  fitting::MagnitudeStats stats() override { return stats_light(fitting::StatsFields::all()); }
  fitting::MagnitudeStats stats_above(double threshold, double shift) override {
    return stats_above_light(threshold, shift, fitting::StatsFields::all());
  }
  fitting::MagnitudeStats stats_light(fitting::StatsFields fields) override;
  fitting::MagnitudeStats stats_above_light(double threshold, double shift, fitting::StatsFields fields) override;
  std::uint64_t count_above(double threshold) override;
  fitting::GpSums gp_sums(double theta, double threshold, double shift) override;
  std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) override;
  double kth_largest(std::uint64_t k) override;
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override;
  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t line_length) override;

  // Passes made so far (each a read of every segment).
  int passes() const { return passes_; }

 private:
  // fn(segment values, global index of their first element) for every segment, in order.
  template <class Fn>
  void each(Fn&& fn);

  const SegmentSource& source_;
  std::uint64_t n_ = 0;
  std::vector<float> scratch_;
  int passes_ = 0;
};

}  // namespace gs::analyzer
