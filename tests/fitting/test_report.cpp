// The fitting report: contents, option validation and the edge cases n = 0, 1, 2, all equal, all
// zero, non-finite values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/naive_passes.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/report.hpp"

namespace {
using gs::testing::NaivePasses;

TEST(Report, FitsAndThresholdsOnGammaData) {
  std::mt19937_64 rng(17);
  std::gamma_distribution<double> g(0.5, 0.01);
  std::vector<float> v(50000);
  for (auto& x : v) x = float(g(rng));
  v[10] = 0.0f;
  v[20] = std::numeric_limits<float>::quiet_NaN();
  NaivePasses passes(v);
  const gs::fitting::FitReport r = gs::fitting::fit_report(passes);
  EXPECT_EQ(r.n, 50000u);
  EXPECT_EQ(r.excluded, 2u);
  EXPECT_EQ(r.zeros, 1u);
  EXPECT_EQ(r.nonfinite, 1u);
  ASSERT_EQ(r.fits.size(), 4u);
  EXPECT_EQ(r.fits[0].dist, "exponential");
  EXPECT_EQ(r.fits[1].dist, "gamma");
  EXPECT_EQ(r.fits[1].params[0].first, "alpha");
  EXPECT_NEAR(r.fits[1].params[0].second, 0.5, 0.02);
  for (const auto& f : r.fits) {
    EXPECT_TRUE(f.error.empty()) << f.error;
    EXPECT_EQ(f.ks_n, 49998u);
    EXPECT_FALSE(f.ks_subsampled);
    EXPECT_EQ(f.tail.size(), 3u);
    EXPECT_EQ(f.qq.size(), 19u);
    EXPECT_DOUBLE_EQ(f.aic, 2.0 * double(f.params.size()) - 2.0 * f.loglik);
  }
  // Each law's likelihood is the closed form at its parameters (the generalized Pareto's comes
  // from its search, without another pass over the data).
  const gs::fitting::MagnitudeStats s = passes.stats();
  const gs::fitting::Sid laws[] = {
      gs::fitting::Exponential(r.fits[0].params[0].second),
      gs::fitting::Gamma(r.fits[1].params[0].second, r.fits[1].params[1].second),
      gs::fitting::GeneralizedPareto(r.fits[2].params[0].second, r.fits[2].params[1].second),
      gs::fitting::Normal(r.fits[3].params[0].second, r.fits[3].params[1].second)};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(r.fits[i].loglik, gs::fitting::loglik(laws[i], passes, s), 1e-12 * std::fabs(r.fits[i].loglik))
        << r.fits[i].dist;
  // The true law wins on likelihood and KS.
  EXPECT_GT(r.fits[1].loglik, r.fits[0].loglik);
  EXPECT_GT(r.fits[1].loglik, r.fits[3].loglik);
  EXPECT_LT(r.fits[1].ks_D, r.fits[0].ks_D);
  EXPECT_GT(r.fits[1].ks_p, 0.001);
  EXPECT_LT(r.fits[3].ks_p, 1e-10);
  ASSERT_EQ(r.thresholds.size(), gs::fitting::all_methods().size() * 3u);  // 8 methods (sidco-topk the 8th)
  for (const auto& t : r.thresholds) EXPECT_TRUE(t.error.empty()) << t.result.method << t.error;
  EXPECT_EQ(r.thresholds[0].result.method, "topk");
  EXPECT_EQ(r.thresholds[0].result.selected, 5000u);
}

TEST(Report, SubsamplesForKsWhenAsked) {
  std::mt19937_64 rng(2);
  std::exponential_distribution<double> e(3.0);
  std::vector<float> v(20000);
  for (auto& x : v) x = float(e(rng));
  NaivePasses passes(v);
  gs::fitting::FitReportOptions o;
  o.ks_max_points = 1000;
  o.dists = {"exponential"};
  o.methods = {"sidco-e"};
  o.densities = {0.05};
  const auto r = gs::fitting::fit_report(passes, o);
  ASSERT_EQ(r.fits.size(), 1u);
  EXPECT_TRUE(r.fits[0].ks_subsampled);
  EXPECT_EQ(r.fits[0].ks_n, 1000u);
  ASSERT_EQ(r.thresholds.size(), 1u);
  EXPECT_EQ(r.thresholds[0].result.stages, gs::fitting::default_sidco_stages(r.thresholds[0].result.density));
}

TEST(Report, BadOptionsThrow) {
  std::vector<float> v = {0.1f, 0.2f, 0.4f};
  NaivePasses passes(v);
  gs::fitting::FitReportOptions o;
  o.dists = {"weibull"};
  EXPECT_THROW(gs::fitting::fit_report(passes, o), gs::Error);
  o = {};
  o.methods = {"topq"};
  EXPECT_THROW(gs::fitting::fit_report(passes, o), gs::Error);
  o = {};
  o.densities = {0.1, 1.5};
  EXPECT_THROW(gs::fitting::fit_report(passes, o), gs::Error);
  o = {};
  o.densities = {0.0};
  EXPECT_THROW(gs::fitting::fit_report(passes, o), gs::Error);
  o = {};
  o.stages = -1;
  EXPECT_THROW(gs::fitting::fit_report(passes, o), gs::Error);
}

// Density 1 is a density like any other in (0, 1], as the compressors take it: every method keeps
// every finite element (zeros included) with threshold 0, and no rule runs.
TEST(Report, AtDensityOneEveryMethodKeepsEveryFiniteElement) {
  std::vector<float> v = {0.1f, -0.2f, 0.0f, 0.4f, std::numeric_limits<float>::quiet_NaN(), 0.3f};
  NaivePasses passes(v);
  gs::fitting::FitReportOptions o;
  o.densities = {1.0, 0.5};
  const auto r = gs::fitting::fit_report(passes, o);
  ASSERT_EQ(r.thresholds.size(), 2 * gs::fitting::all_methods().size());
  for (const auto& t : r.thresholds) {
    if (t.result.density != 1.0) continue;
    SCOPED_TRACE(t.result.method);
    EXPECT_TRUE(t.error.empty()) << t.error;
    EXPECT_EQ(t.result.threshold, 0.0);
    EXPECT_EQ(t.result.selected, 5u);  // the six values but the NaN
    EXPECT_DOUBLE_EQ(t.result.quality, 5.0 / 6.0);
  }
  for (const auto& f : r.fits)
    if (f.error.empty()) {
      ASSERT_EQ(f.tail.size(), 2u);
      EXPECT_DOUBLE_EQ(f.tail[0].predicted, 6.0);
    }
}

// Edge cases record their problem per fit / per method instead of failing the whole report.
TEST(Report, EdgeCasesAreRecordedNotThrown) {
  std::vector<float> none;
  NaivePasses p0(none);
  auto r = gs::fitting::fit_report(p0);
  EXPECT_EQ(r.n, 0u);
  for (const auto& f : r.fits) EXPECT_FALSE(f.error.empty());
  for (const auto& t : r.thresholds) EXPECT_FALSE(t.error.empty());

  std::vector<float> one = {0.3f};
  NaivePasses p1(one);
  r = gs::fitting::fit_report(p1);
  EXPECT_TRUE(r.fits[0].error.empty());            // exponential: beta = the value
  EXPECT_FALSE(r.fits[1].error.empty());           // gamma needs spread
  EXPECT_EQ(r.thresholds[0].result.selected, 1u);  // top-k: k = 1

  std::vector<float> two = {0.3f, -0.9f};
  NaivePasses p2(two);
  r = gs::fitting::fit_report(p2);
  for (const auto& f : r.fits) EXPECT_TRUE(f.error.empty()) << f.dist << ": " << f.error;
  EXPECT_EQ(r.fits[0].ks_n, 2u);

  std::vector<float> equal(100, -0.5f);
  NaivePasses pe(equal);
  r = gs::fitting::fit_report(pe);
  EXPECT_TRUE(r.fits[0].error.empty());
  EXPECT_NE(r.fits[1].error.find("equal"), std::string::npos);
  EXPECT_FALSE(r.fits[2].error.empty());
  EXPECT_FALSE(r.fits[3].error.empty());

  std::vector<float> zeros(100, 0.0f);
  NaivePasses pz(zeros);
  r = gs::fitting::fit_report(pz);
  EXPECT_EQ(r.excluded, 100u);
  for (const auto& f : r.fits) EXPECT_FALSE(f.error.empty());
  EXPECT_EQ(r.thresholds[0].result.selected, 10u);  // top-k of zeros: k elements by the tie rule

  std::vector<float> bad = {std::numeric_limits<float>::quiet_NaN(), 0.5f, 1.5f, 0.2f,
                            std::numeric_limits<float>::infinity()};
  NaivePasses pb(bad);
  r = gs::fitting::fit_report(pb);
  EXPECT_EQ(r.nonfinite, 2u);
  EXPECT_TRUE(r.fits[0].error.empty());
  EXPECT_EQ(r.fits[0].ks_n, 3u);
}

// The naive passes with one call (the fail_at-th of any pass, counting from 0) throwing what
// `fail` throws instead: a failure of the machine behind the passes, or of the data.
class FailingPasses final : public gs::fitting::MagnitudePasses {
  template <class F>
  auto call(F f) {  // (defined first: the passes below deduce their return type from it)
    if (calls_++ == fail_at_) fail_();
    return f();
  }

 public:
  FailingPasses(std::span<const float> g, std::int64_t fail_at, std::function<void()> fail)
      : inner_(g), fail_at_(fail_at), fail_(std::move(fail)) {}
  std::int64_t calls() const { return calls_; }

  std::uint64_t size() const override { return inner_.size(); }
  gs::fitting::MagnitudeStats stats() override {
    return call([&] { return inner_.stats(); });
  }
  gs::fitting::MagnitudeStats stats_above(double t, double s) override {
    return call([&] { return inner_.stats_above(t, s); });
  }
  gs::fitting::MagnitudeStats stats_light(gs::fitting::StatsFields f) override {
    return call([&] { return inner_.stats_light(f); });
  }
  gs::fitting::MagnitudeStats stats_above_light(double t, double s, gs::fitting::StatsFields f) override {
    return call([&] { return inner_.stats_above_light(t, s, f); });
  }
  std::uint64_t count_above(double t) override {
    return call([&] { return inner_.count_above(t); });
  }
  gs::fitting::GpSums gp_sums(double theta, double t, double s) override {
    return call([&] { return inner_.gp_sums(theta, t, s); });
  }
  std::vector<double> sorted_sample(std::uint64_t m, std::uint64_t seed, bool* sub) override {
    return call([&] { return inner_.sorted_sample(m, seed, sub); });
  }
  double kth_largest(std::uint64_t k) override {
    return call([&] { return inner_.kth_largest(k); });
  }
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override {
    return call([&] { return inner_.random_sample(m, seed); });
  }
  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t len) override {
    return call([&] { return inner_.spread_sample(lines, len); });
  }

 private:
  NaivePasses inner_;
  std::int64_t fail_at_;
  std::function<void()> fail_;
  std::int64_t calls_ = 0;
};

// A device that fails at any pass of the report ends the report with its error: no fit and no
// method ever records it as its own failure. A failure of the data at the same pass (a gs::Error)
// stays in the row of the fit or method it hit, as before.
TEST(Report, DeviceFailuresEndTheReportAndNeverBecomeARow) {
  std::mt19937_64 rng(29);
  std::gamma_distribution<double> g(0.7, 0.02);
  std::vector<float> v(3000);
  for (auto& x : v) x = float(rng() & 1 ? g(rng) : -g(rng));
  gs::fitting::FitReportOptions o;
  o.densities = {0.01, 0.001};
  FailingPasses counting(v, -1, [] {});
  const gs::fitting::FitReport clean = gs::fitting::fit_report(counting, o);
  const std::int64_t passes = counting.calls();
  ASSERT_GT(passes, 20);  // every fit and method reads the data: the failures below land in each
  for (const auto& f : clean.fits) ASSERT_TRUE(f.error.empty()) << f.dist << ": " << f.error;

  const std::string device = "CUDA error: cudaErrorMemoryAllocation (out of memory) in a test";
  int data_rows = 0;
  for (std::int64_t at = 0; at < passes; ++at) {
    SCOPED_TRACE("failing pass " + std::to_string(at) + " of " + std::to_string(passes));
    FailingPasses failing(v, at, [&] { throw gs::DeviceFailure(device); });
    try {
      const gs::fitting::FitReport r = gs::fitting::fit_report(failing, o);
      ADD_FAILURE() << "the report returned after a device failure";
      for (const auto& f : r.fits) EXPECT_EQ(f.error.find("out of memory"), std::string::npos) << f.dist;
      for (const auto& t : r.thresholds) EXPECT_EQ(t.error.find("out of memory"), std::string::npos) << t.result.method;
    } catch (const gs::DeviceFailure& e) {
      EXPECT_EQ(e.what(), device);
    }
    // The same pass failing for the data: the report goes on, and the failure is somewhere in a row
    // (the first pass, the statistics every fit needs, and the KS sample stop it instead).
    FailingPasses bad_data(v, at, [] { throw gs::Error("degenerate for this test"); });
    try {
      const gs::fitting::FitReport r = gs::fitting::fit_report(bad_data, o);
      int rows = 0;
      for (const auto& f : r.fits) rows += f.error == "degenerate for this test";
      for (const auto& t : r.thresholds) rows += t.error == "degenerate for this test";
      EXPECT_EQ(rows, 1);
      data_rows += rows;
    } catch (const gs::DeviceFailure&) {
      ADD_FAILURE() << "a gs::Error of the data came out as a device failure";
    } catch (const gs::Error&) {
      EXPECT_LE(at, 1);  // stats() and sorted_sample() come before any fit
    }
  }
  EXPECT_GE(data_rows, passes - 2);
}

}  // namespace
