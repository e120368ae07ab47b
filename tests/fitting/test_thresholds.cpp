// Thresholds: SIDCo quality on synthetic SID data at n = 1e6, baselines' rules, edge cases, the
// adaptive stage controller.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/naive_passes.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/estimators.hpp"
#include "gs/fitting/formulas.hpp"
#include "gs/fitting/report.hpp"
#include "gs/fitting/thresholds.hpp"
#include "reference.hpp"

namespace {
using gs::testing::NaivePasses;
using gs::testing::near_rel;

enum class Law { laplace, gamma, gpareto };

// Signed synthetic gradients of n = 1e6: Laplace (|g| exponential), double gamma (shape 0.5)
// and double generalized Pareto (xi = 0.2), random signs, fixed seeds.
const std::vector<float>& synthetic(Law law) {
  static std::vector<float> data[3];
  auto& v = data[int(law)];
  if (!v.empty()) return v;
  std::mt19937_64 rng(1000 + int(law));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::exponential_distribution<double> e(1.0 / 0.01);
  std::gamma_distribution<double> g(0.5, 0.02);
  v.resize(1'000'000);
  for (auto& x : v) {
    double m = 0.0;
    if (law == Law::laplace)
      m = e(rng);
    else if (law == Law::gamma)
      m = g(rng);
    else
      m = 0.01 * std::expm1(-0.2 * std::log1p(-u(rng))) / 0.2;
    x = float(u(rng) < 0.5 ? -m : m);
  }
  return v;
}

struct SidcoCase {
  Law law;
  gs::fitting::SidcoVariant variant;
  int stages;
  bool recount;
};

class SidcoQuality : public ::testing::TestWithParam<SidcoCase> {};

// Every case asserts +-10% of the target density for density = 0.1, 0.01, 0.001 at n = 1e6 with the
// stated stage count. Not listed because no stage count in 1..10 meets it on these data (see the
// report): the reference SIDCo-E and SIDCo-GP on generalized-Pareto data (xi = 0.2; qualities
// 0.73-0.98 and 0.86-0.91), and SIDCo-E with recount on it at density = 0.001 (0.88-0.92).
TEST_P(SidcoQuality, WithinTenPercentOfTarget) {
  const auto [law, variant, stages, recount] = GetParam();
  NaivePasses passes(synthetic(law));
  for (double density : {0.1, 0.01, 0.001}) {
    const auto r =
        gs::fitting::sidco_threshold(passes, density, variant, stages, gs::fitting::SidcoRule{recount, false});
    EXPECT_NEAR(r.quality, 1.0, 0.1) << gs::fitting::method_name(variant) << " law " << int(law) << " delta " << density
                                     << " stages " << r.stages;
    EXPECT_EQ(r.method, gs::fitting::method_name(variant));
    EXPECT_DOUBLE_EQ(r.quality, double(r.selected) / 1e6 / density);
    EXPECT_EQ(r.selected, passes.count_above(r.threshold));
    EXPECT_EQ(r.stages, stages);
  }
}

using V = gs::fitting::SidcoVariant;
INSTANTIATE_TEST_SUITE_P(
    Reference, SidcoQuality,
    ::testing::Values(SidcoCase{Law::laplace, V::exponential, 3, false}, SidcoCase{Law::laplace, V::pareto, 3, false},
                      SidcoCase{Law::laplace, V::gamma_pareto, 3, false},
                      SidcoCase{Law::gamma, V::exponential, 3, false}, SidcoCase{Law::gamma, V::pareto, 4, false},
                      SidcoCase{Law::gamma, V::gamma_pareto, 3, false}, SidcoCase{Law::gpareto, V::pareto, 3, false}));
INSTANTIATE_TEST_SUITE_P(
    Recount, SidcoQuality,
    ::testing::Values(SidcoCase{Law::laplace, V::exponential, 3, true}, SidcoCase{Law::laplace, V::pareto, 3, true},
                      SidcoCase{Law::laplace, V::gamma_pareto, 3, true}, SidcoCase{Law::gamma, V::exponential, 3, true},
                      SidcoCase{Law::gamma, V::pareto, 3, true}, SidcoCase{Law::gamma, V::gamma_pareto, 3, true},
                      SidcoCase{Law::gpareto, V::pareto, 3, true}, SidcoCase{Law::gpareto, V::gamma_pareto, 3, true}));

TEST(Sidco, RecountCorrectsTheFirstStageError) {
  // Gamma first stage on generalized-Pareto data misses 0.25; recount removes the carried error.
  NaivePasses passes(synthetic(Law::gpareto));
  const auto ref = gs::fitting::sidco_threshold(passes, 0.01, V::gamma_pareto, 3, gs::fitting::SidcoRule::published());
  const auto fix = gs::fitting::sidco_threshold(passes, 0.01, V::gamma_pareto, 3, gs::fitting::SidcoRule{true, false});
  EXPECT_LT(std::fabs(fix.quality - 1.0), std::fabs(ref.quality - 1.0));
}

TEST(Sidco, SingleStageIsTheSidQuantile) {
  NaivePasses passes(synthetic(Law::laplace));
  const auto s = passes.stats();
  const auto r = gs::fitting::sidco_threshold(passes, 0.01, gs::fitting::SidcoVariant::exponential, 1,
                                              gs::fitting::SidcoRule::published());
  EXPECT_EQ(r.stages, 1);
  EXPECT_DOUBLE_EQ(r.threshold, -s.mean() * std::log(0.01));
  const auto p = gs::fitting::sidco_threshold(passes, 0.01, gs::fitting::SidcoVariant::pareto, 1,
                                              gs::fitting::SidcoRule::published());
  EXPECT_DOUBLE_EQ(p.threshold, gs::fitting::sid_threshold(gs::fitting::fit_gpareto_moments(s), 0.01));
  const auto g = gs::fitting::sidco_threshold(passes, 0.01, gs::fitting::SidcoVariant::gamma_pareto, 1,
                                              gs::fitting::SidcoRule::published());
  EXPECT_DOUBLE_EQ(g.threshold, gs::fitting::sid_threshold(gs::fitting::fit_gamma_closed_form(s), 0.01));
}

TEST(Sidco, TwoStagesFollowTheAlgorithmByHand) {
  std::mt19937_64 rng(21);
  std::gamma_distribution<double> g(0.6, 1.0);
  std::vector<float> v(20000);
  for (auto& x : v) x = float(g(rng));
  NaivePasses passes(v);
  const auto s = passes.stats();
  const double eta1 = -s.mean() * std::log(0.25);
  std::vector<double> y;
  for (float x : v)
    if (x > eta1) y.push_back(x);
  const double t = *std::min_element(y.begin(), y.end());
  double mean = 0.0;
  for (double yy : y) mean += yy - t;
  mean /= double(y.size());
  const double eta2 = t - mean * std::log(0.001 / 0.25);
  const auto r = gs::fitting::sidco_threshold(passes, 0.001, gs::fitting::SidcoVariant::exponential, 2,
                                              gs::fitting::SidcoRule::published());
  EXPECT_EQ(r.stages, 2);
  EXPECT_TRUE(near_rel(r.threshold, eta2, 1e-12));
}

TEST(Sidco, ZerosDoNotDiluteTheTarget) {
  std::vector<float> v = synthetic(Law::laplace);
  v.resize(200000);
  for (std::size_t i = 0; i < v.size(); i += 2) v[i] = 0.0f;  // half zeros
  NaivePasses passes(v);
  const auto r = gs::fitting::sidco_threshold(passes, 0.01, gs::fitting::SidcoVariant::exponential, 1,
                                              gs::fitting::SidcoRule::published());
  EXPECT_NEAR(r.quality, 1.0, 0.1);
}

// Eight values in nine exactly zero (a 3x3 convolution on a 1x1 input): stage 1's quarter of n is
// more than every non-zero value, so stage 1 keeps them all and the tails aim at the target from
// there. (Stopping at stage 1 sent every non-zero value: 11x the target.)
TEST(Sidco, MostlyZerosStillReachTheTargetWithSeveralStages) {
  std::vector<float> v = synthetic(Law::laplace);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (i % 9 != 4) v[i] = 0.0f;
  NaivePasses passes(v);
  for (auto variant : {gs::fitting::SidcoVariant::exponential, gs::fitting::SidcoVariant::pareto,
                       gs::fitting::SidcoVariant::gamma_pareto})
    for (int m : {2, 3})
      for (double density : {0.05, 0.01}) {
        const auto r = gs::fitting::sidco_threshold(passes, density, variant, m, gs::fitting::SidcoRule::published());
        SCOPED_TRACE(std::string(gs::fitting::method_name(variant)) + " M=" + std::to_string(m) +
                     " density=" + std::to_string(density));
        EXPECT_EQ(r.stages, m);
        EXPECT_GT(r.threshold, 0.0);
        EXPECT_NEAR(r.quality, 1.0, 0.1);
      }
  // A target above the non-zero count keeps every non-zero value, in one stage.
  const auto all = gs::fitting::sidco_threshold(passes, 0.2, gs::fitting::SidcoVariant::exponential, 3,
                                                gs::fitting::SidcoRule::published());
  EXPECT_EQ(all.threshold, 0.0);
  EXPECT_EQ(all.selected, (v.size() + 4) / 9);
  EXPECT_EQ(all.stages, 1);
}

TEST(Thresholds, TopKKeepsExactlyKWithTies) {
  std::vector<float> v = {0.1f, -0.5f, 0.5f, 0.5f, 0.2f, 0.0f, 0.9f, 0.3f, 0.5f, 0.05f};
  NaivePasses passes(v);
  const auto r = gs::fitting::topk_threshold(passes, 0.3);  // k = 3: 0.9, then two of the four 0.5s
  EXPECT_EQ(r.method, "topk");
  EXPECT_FLOAT_EQ(float(r.threshold), 0.5f);
  EXPECT_EQ(r.selected, 3u);
  EXPECT_DOUBLE_EQ(r.quality, 1.0);
  EXPECT_EQ(passes.count_above(r.threshold), 1u);  // strictly above: the documented tie rule
}

TEST(Thresholds, TopKOnLargeData) {
  NaivePasses passes(synthetic(Law::gamma));
  const auto r = gs::fitting::topk_threshold(passes, 0.001);
  EXPECT_EQ(r.selected, 1000u);
  EXPECT_EQ(passes.count_above(r.threshold), 999u);  // continuous data: no ties
}

TEST(Thresholds, BaselinesLandNearTheTarget) {
  NaivePasses passes(synthetic(Law::gamma));
  for (double density : {0.1, 0.01, 0.001}) {
    SCOPED_TRACE(density);
    const std::uint64_t k = gs::fitting::target_count(1'000'000, density);
    const auto d = gs::fitting::dgc_threshold(passes, density, 99);
    EXPECT_EQ(d.method, "dgc");
    EXPECT_LE(3 * d.selected, 4 * k);  // the hierarchical step caps it
    EXPECT_NEAR(d.quality, 1.0, 0.35);
    const auto rs = gs::fitting::redsync_threshold(passes, density);
    EXPECT_EQ(rs.method, "redsync");
    EXPECT_GE(rs.stages, 1);
    EXPECT_LE(rs.stages, 3);
    EXPECT_EQ(rs.selected, passes.count_above(rs.threshold));
    const auto gk = gs::fitting::gaussianksgd_threshold(passes, density);
    EXPECT_GE(gk.stages, 1);
    EXPECT_LE(gk.stages, 4);
    EXPECT_EQ(gk.selected, passes.count_above(gk.threshold));
  }
}

TEST(Thresholds, GaussianKsgdRuleByHand) {
  std::vector<float> v = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.0f, 1.5f, -1.0f, 0.75f, 2.5f};
  NaivePasses passes(v);
  const auto n = gs::fitting::fit_normal_signed(passes.stats());
  EXPECT_TRUE(near_rel(gs::fitting::gaussian_threshold(n, 0.2), n.mu() + 1.2815515655446004 * n.sigma(), 1e-13));
  const auto r = gs::fitting::gaussianksgd_threshold(passes, 0.2);  // k = 2
  EXPECT_GE(3 * r.selected, 2u * 2u);
  EXPECT_LE(3 * r.selected, 4u * 2u + 3u * 4u);
}

TEST(Thresholds, RedSyncBisectionByHand) {
  std::vector<float> v(100);
  for (int i = 0; i < 100; ++i) v[i] = float(i + 1);  // mean 50.5, max 100
  NaivePasses passes(v);
  // k = 10: t = 0.5 -> eta 75.25, 25 above (>= 2k) -> l = 0.5; t = 0.75 -> eta 87.625, 13 above: stop.
  const auto r = gs::fitting::redsync_threshold(passes, 0.1);
  EXPECT_EQ(r.stages, 2);
  EXPECT_DOUBLE_EQ(r.threshold, 50.5 + 0.75 * 49.5);
  EXPECT_EQ(r.selected, 13u);
}

TEST(Thresholds, SidThresholdsAreComplementQuantiles) {
  EXPECT_DOUBLE_EQ(gs::fitting::sid_threshold(gs::fitting::Exponential(2.0), 1e-3), -2.0 * std::log(1e-3));
  const gs::fitting::GeneralizedPareto gp(0.3, 1.0);
  EXPECT_TRUE(near_rel(gs::fitting::sid_threshold(gp, 1e-3), (std::pow(1e-3, -0.3) - 1.0) / 0.3, 1e-13));
  const gs::fitting::Gamma g(1.0, 2.0);  // exponential: the approximation is exact at alpha = 1
  EXPECT_TRUE(near_rel(gs::fitting::gamma_threshold_approx(g, 1e-3), gs::fitting::sid_threshold(g, 1e-3), 1e-12));
  EXPECT_TRUE(near_rel(gs::fitting::sid_threshold(gs::fitting::Sid(g), 1e-3), -2.0 * std::log(1e-3), 1e-12));
}

TEST(Thresholds, BadInputsThrow) {
  std::vector<float> v = {0.3f, 0.1f, 0.7f};
  NaivePasses passes(v);
  for (double bad : {0.0, -0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THROW(gs::fitting::topk_threshold(passes, bad), gs::Error) << bad;
    EXPECT_THROW(gs::fitting::sidco_threshold(passes, bad, gs::fitting::SidcoVariant::exponential, 2,
                                              gs::fitting::SidcoRule::published()),
                 gs::Error);
    EXPECT_THROW(gs::fitting::sid_threshold(gs::fitting::Exponential(1.0), bad), gs::Error);
    EXPECT_THROW(gs::fitting::StageController{bad}, gs::Error);
  }
  EXPECT_THROW(gs::fitting::sidco_threshold(passes, 0.1, gs::fitting::SidcoVariant::exponential, 0,
                                            gs::fitting::SidcoRule::published()),
               gs::Error);
  EXPECT_THROW(gs::fitting::threshold_by_name("topq", passes, 0.1, 1, 0), gs::Error);
  std::vector<float> none;
  NaivePasses empty(none);
  EXPECT_THROW(gs::fitting::topk_threshold(empty, 0.1), gs::Error);
  EXPECT_THROW(gs::fitting::threshold_target(0, 0.1), gs::Error);
  // k > the finite values: 4 elements, 3 non-finite, density 0.5 -> k = 2 > 1.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> mostly_inf = {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 0.2f};
  NaivePasses mi(mostly_inf);
  EXPECT_THROW(gs::fitting::topk_threshold(mi, 0.5), gs::Error);
}

TEST(Thresholds, TargetCount) {
  EXPECT_EQ(gs::fitting::target_count(1000, 0.001), 1u);
  EXPECT_EQ(gs::fitting::target_count(999, 0.001), 1u);  // max(1, floor)
  EXPECT_EQ(gs::fitting::target_count(1'000'000, 0.01), 10000u);
  EXPECT_EQ(gs::fitting::target_count(10, 0.99), 9u);
  // One rule everywhere: nothing to keep of nothing; a density of 1 keeps all; outside (0, 1] throws.
  EXPECT_EQ(gs::fitting::target_count(0, 0.1), 0u);
  EXPECT_EQ(gs::fitting::target_count(7, 1.0), 7u);
  for (double bad : {0.0, -0.1, 1.5, std::nan("")}) EXPECT_THROW(gs::fitting::target_count(10, bad), gs::Error);
  EXPECT_THROW(gs::fitting::threshold_target(10, 1.0), gs::Error);  // a threshold keeping all is none
}

TEST(Thresholds, DegenerateDataGiveDocumentedResults) {
  std::vector<float> zeros(50, 0.0f);
  NaivePasses zp(zeros);
  const auto r =
      gs::fitting::sidco_threshold(zp, 0.1, gs::fitting::SidcoVariant::pareto, 3, gs::fitting::SidcoRule::published());
  EXPECT_EQ(r.selected, 0u);
  EXPECT_EQ(r.stages, 0);
  EXPECT_EQ(gs::fitting::redsync_threshold(zp, 0.1).selected, 0u);
  const auto t = gs::fitting::topk_threshold(zp, 0.1);  // k = 5 zeros: threshold 0, keeps 5 by the tie rule
  EXPECT_EQ(t.threshold, 0.0);
  EXPECT_EQ(t.selected, 5u);
  EXPECT_THROW(gs::fitting::gaussianksgd_threshold(zp, 0.1), gs::Error);  // no spread
  std::vector<float> equal(40, 0.25f);
  NaivePasses ep(equal);
  const auto e = gs::fitting::sidco_threshold(ep, 0.1, gs::fitting::SidcoVariant::gamma_pareto, 3,
                                              gs::fitting::SidcoRule::published());
  EXPECT_EQ(e.stages, 1);  // degenerate: exponential first stage only
  EXPECT_GT(e.threshold, 0.25);
  EXPECT_EQ(e.selected, 0u);
  std::vector<float> one = {0.4f};
  NaivePasses op(one);
  EXPECT_EQ(gs::fitting::topk_threshold(op, 0.5).selected, 1u);  // k = max(1, 0) = 1
  EXPECT_EQ(gs::fitting::sidco_threshold(op, 0.5, gs::fitting::SidcoVariant::exponential, 1,
                                         gs::fitting::SidcoRule::published())
                .stages,
            1);
}

TEST(Thresholds, NonFiniteValuesAreNeverSelected) {
  std::vector<float> v = synthetic(Law::laplace);
  v.resize(10000);
  v[3] = std::numeric_limits<float>::quiet_NaN();
  v[7] = std::numeric_limits<float>::infinity();
  NaivePasses passes(v);
  for (const auto& m : gs::fitting::all_methods()) {
    const auto r = gs::fitting::threshold_by_name(m, passes, 0.01, 3, 5);
    EXPECT_TRUE(std::isfinite(r.threshold)) << m;
    EXPECT_GT(r.quality, 0.3) << m;  // crude baselines (GaussianKSGD, RedSync) land within 2x
    EXPECT_LT(r.quality, 2.5) << m;
  }
}

TEST(StageController, MovesAndClamps) {
  gs::fitting::StageController c(0.001, 2);
  EXPECT_EQ(c.max_stages(), 10);
  EXPECT_EQ(gs::fitting::StageController(0.1).max_stages(), 4);
  EXPECT_EQ(gs::fitting::StageController(0.01).max_stages(), 7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.record(0.002), 2);  // decides every 5 steps
  EXPECT_EQ(c.record(0.002), 1);                              // overshoot: fewer stages
  for (int i = 0; i < 5; ++i) c.record(0.002);
  EXPECT_EQ(c.stages(), 1);  // clamped at 1
  for (int i = 0; i < 5; ++i) c.record(0.0005);
  EXPECT_EQ(c.stages(), 2);  // undershoot: more stages
  for (int i = 0; i < 5; ++i) c.record(0.001);
  EXPECT_EQ(c.stages(), 2);  // on target: unchanged
  for (int i = 0; i < 100; ++i) c.record(0.0001);
  EXPECT_EQ(c.stages(), 10);  // clamped at ceil(log2(1/density))
}

// A new target keeps the stage count (clamped) and the window: each step is judged against the
// target it ran at.
TEST(StageController, RetargetJudgesEachStepAgainstItsOwnTarget) {
  gs::fitting::StageController c(0.001, 5);
  c.retarget(0.1);
  EXPECT_EQ(c.max_stages(), 4);
  EXPECT_EQ(c.stages(), 4);                   // clamped
  for (int i = 0; i < 2; ++i) c.record(0.1);  // on target at 0.1
  c.retarget(0.01);
  EXPECT_EQ(c.max_stages(), 7);
  for (int i = 0; i < 2; ++i) c.record(0.01);  // on target at 0.01
  EXPECT_EQ(c.record(0.01), 4);                // window of 5 on target: unchanged
  // Had the window been judged against the last target only, the 0.1 steps would read as 10x.
  c.retarget(0.05);
  for (int i = 0; i < 4; ++i) c.record(0.05);
  EXPECT_EQ(c.record(0.01), 4);               // mean 0.84: still inside [0.8, 1.2]
  for (int i = 0; i < 5; ++i) c.record(0.2);  // 4x over
  EXPECT_EQ(c.stages(), 3);
  EXPECT_THROW(c.retarget(0.0), gs::Error);
  EXPECT_THROW(c.retarget(1.0), gs::Error);
  EXPECT_EQ(c.stages(), 3);
}

}  // namespace

// SIDCo's count correction (SidcoRule::correct): one secant step on ln(count) against the
// threshold, exact for an exponential tail; it moves a threshold whose selection lands outside
// [0.8, 1.25] of the target and leaves one inside alone, at the cost of one more count.
TEST(SidcoCorrection, TheSecantStepIsExactOnAnExponentialTail) {
  const double beta = 0.37, N = 1e6, k = 1234.0;
  auto count = [&](double t) { return N * std::exp(-t / beta); };
  const double t0 = 0.5, t1 = 2.9;  // the last two thresholds, on either side of the target's
  const double t = gs::fitting::formula::secant_log_count(t0, count(t0), t1, count(t1), k);
  EXPECT_NEAR(t, beta * std::log(N / k), 1e-9);
  // An empty selection still moves the threshold down, and degenerate points leave it.
  EXPECT_LT(gs::fitting::formula::secant_log_count(t0, count(t0), 9.0, 0.0, k), 9.0);
  EXPECT_EQ(gs::fitting::formula::secant_log_count(1.0, 100.0, 1.0, 50.0, k), 1.0);
  EXPECT_EQ(gs::fitting::formula::secant_log_count(1.0, 100.0, 2.0, 200.0, k), 2.0);
}

namespace {

// |g| whose bulk and tail follow different laws: a Laplace bulk and a heavier tail of 2% (as the
// accumulator of momentum correction grows between selections), where every SIDCo variant's fit
// of the bulk misplaces the tail's threshold.
std::vector<float> bulk_and_tail(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> bulk(100.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = (rng() & 1 ? 1.0f : -1.0f) * (u(rng) < 0.02f ? 0.02f / std::pow(u(rng), 0.5f) : bulk(rng));
  return g;
}

}  // namespace

TEST(SidcoCorrection, ItBringsASelectionOutsideItsBandBackAtTheCostOfOneCount) {
  using V = gs::fitting::SidcoVariant;
  const auto g = bulk_and_tail(200000, 3);
  int moved = 0;
  for (const V variant : {V::exponential, V::pareto, V::gamma_pareto})
    for (const double density : {0.01, 0.001})
      for (const int stages : {1, 2, 3}) {
        SCOPED_TRACE(std::to_string(int(variant)) + " " + std::to_string(density) + " " + std::to_string(stages));
        gs::testing::NaivePasses published_passes(g), passes(g);
        const auto published = gs::fitting::sidco_threshold(published_passes, density, variant, stages,
                                                            gs::fitting::SidcoRule::published());
        const auto corrected = gs::fitting::sidco_threshold(passes, density, variant, stages);
        const bool outside = published.quality < 0.8 || published.quality > 1.25;
        EXPECT_EQ(corrected.corrected, outside);
        if (!outside) {
          EXPECT_EQ(corrected.threshold, published.threshold);
          EXPECT_EQ(passes.passes(), published_passes.passes());
          continue;
        }
        ++moved;
        // Closer to the target, in ratio, and at most one more read of the data.
        EXPECT_LT(std::fabs(std::log(corrected.quality)), std::fabs(std::log(published.quality)));
        EXPECT_GE(corrected.quality, 0.5);
        EXPECT_LE(corrected.quality, 2.0);
        EXPECT_EQ(passes.passes(), published_passes.passes() + 1);
      }
  EXPECT_GE(moved, 6) << "the data should put most published thresholds outside the band";
}
