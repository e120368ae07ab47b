#pragma once
// NaivePasses: the plainest possible gs::MagnitudePasses over a host vector, in double precision,
// one obvious loop per pass. It is the test oracle: backends and the fitting math are checked
// against it, so it favours being evidently right over being fast.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "gs/fitting/passes.hpp"

namespace gs::testing {

class NaivePasses final : public gs::fitting::MagnitudePasses {
 public:
  explicit NaivePasses(std::span<const float> g) : g_(g) {}

  std::uint64_t size() const override { return g_.size(); }

  // Reads of the data so far (each call of a pass below is one).
  int passes() const { return passes_; }

  gs::fitting::MagnitudeStats stats() override {
    ++passes_;
    gs::fitting::MagnitudeStats s;
    for (float v : g_) gs::fitting::add(s, double(v));
    return s;
  }

  gs::fitting::MagnitudeStats stats_above(double threshold, double shift) override {
    ++passes_;
    gs::fitting::MagnitudeStats s;
    for (float v : g_) {
      const double x = std::fabs(double(v));
      if (std::isfinite(x) && x > threshold) gs::fitting::add(s, x - shift);
    }
    return s;
  }

  std::uint64_t count_above(double threshold) override {
    ++passes_;
    std::uint64_t c = 0;
    for (float v : g_) {
      const double x = std::fabs(double(v));
      if (std::isfinite(x) && x > threshold) ++c;
    }
    return c;
  }

  gs::fitting::GpSums gp_sums(double theta, double threshold, double shift) override {
    ++passes_;
    gs::fitting::GpSums s;
    for (float v : g_) {
      const double x = std::fabs(double(v));
      if (!std::isfinite(x) || !(x > threshold)) continue;
      const double u = 1.0 + theta * (x - shift);
      ++s.count;
      s.sum_log1p += std::log1p(theta * (x - shift));
      s.sum_inv += 1.0 / u;
      s.sum_inv2 += 1.0 / (u * u);
    }
    return s;
  }

  std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) override {
    std::vector<double> x = finite_nonzero();
    const bool sub = x.size() > max_points;
    if (sub) {
      std::mt19937_64 rng(seed);
      std::shuffle(x.begin(), x.end(), rng);
      x.resize(max_points);
    }
    if (subsampled) *subsampled = sub;
    std::sort(x.begin(), x.end());
    return x;
  }

  double kth_largest(std::uint64_t k) override {
    std::vector<double> x;
    for (float v : g_) {
      const double a = std::fabs(double(v));
      if (std::isfinite(a)) x.push_back(a);
    }
    if (k < 1 || k > x.size()) throw std::out_of_range("kth_largest: k out of range");
    std::sort(x.begin(), x.end(), std::greater<>());
    return x[k - 1];
  }

  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t line_length) override {
    if (g_.size() < lines * line_length) return std::vector<float>(g_.begin(), g_.end());
    std::vector<float> out;
    for (std::uint64_t l = 0; l < lines; ++l) {
      const std::uint64_t start = gs::fitting::spread_line_start(g_.size(), lines, line_length, l);
      out.insert(out.end(), g_.begin() + std::ptrdiff_t(start), g_.begin() + std::ptrdiff_t(start + line_length));
    }
    return out;
  }
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, g_.size() - 1);
    std::vector<float> out(m);
    for (auto& o : out) o = std::fabs(g_[pick(rng)]);
    return out;
  }

 private:
  std::vector<double> finite_nonzero() const {
    std::vector<double> x;
    for (float v : g_) {
      const double a = std::fabs(double(v));
      if (std::isfinite(a) && a != 0.0) x.push_back(a);
    }
    return x;
  }
  std::span<const float> g_;
  int passes_ = 0;
};

}  // namespace gs::testing
