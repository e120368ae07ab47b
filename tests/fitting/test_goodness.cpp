// Goodness of fit: KS/AD against scipy on fixed samples, Kolmogorov distributions against
// scipy.stats.kstwo / kstwobign, likelihoods, tail checks, QQ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "common/naive_passes.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/estimators.hpp"
#include "gs/fitting/goodness.hpp"
#include "reference.hpp"

namespace {
using gs::testing::near_rel;
using gs::testing::ref_value;

std::vector<double> sorted_of(const std::vector<float>& v) {
  std::vector<double> d(v.begin(), v.end());
  std::sort(d.begin(), d.end());
  return d;
}

TEST(Goodness, KsAndAdMatchScipyAtScipysFits) {
  for (const char* name : {"exponential", "gamma", "gpareto_pos", "gpareto_neg", "halfnormal"}) {
    SCOPED_TRACE(name);
    const auto x = sorted_of(gs::testing::reference_sample(name));
    const std::string p = std::string("fit.") + name + ".";
    const std::vector<std::pair<std::string, gs::fitting::Sid>> laws = {
        {"expon", gs::fitting::Exponential(ref_value(p + "expon.beta"))},
        {"gamma", gs::fitting::Gamma(ref_value(p + "gamma.alpha"), ref_value(p + "gamma.beta"))},
        {"genpareto", gs::fitting::GeneralizedPareto(ref_value(p + "genpareto.xi"), ref_value(p + "genpareto.sigma"))},
        {"norm", gs::fitting::Normal(ref_value(p + "norm.mu"), ref_value(p + "norm.sigma"))}};
    for (const auto& [law, d] : laws) {
      SCOPED_TRACE(law);
      const double D = gs::fitting::ks_statistic(d, x);
      EXPECT_NEAR(D, ref_value(p + law + ".ks_D"), 1e-12);
      EXPECT_TRUE(near_rel(gs::fitting::ks_pvalue(D, x.size()), ref_value(p + law + ".ks_p"), 1e-6));
      EXPECT_TRUE(near_rel(gs::fitting::ad_statistic(d, x), ref_value(p + law + ".ad_A2"), 1e-9));
    }
  }
}

TEST(Goodness, KolmogorovLimitMatchesKstwobign) {
  for (double x : {0.2, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 4.0}) {
    std::ostringstream k;
    k << x;
    std::string key = k.str();
    if (key.find('.') == std::string::npos) key += ".0";
    EXPECT_TRUE(near_rel(gs::fitting::kolmogorov_sf(x), ref_value("kstwobign.sf." + key), 1e-12)) << x;
    EXPECT_TRUE(near_rel(gs::fitting::kolmogorov_cdf(x), ref_value("kstwobign.cdf." + key), 1e-12)) << x;
  }
}

TEST(Goodness, FiniteSampleKsMatchesKstwo) {
  // Exact regimes (Durbin/MTW, Smirnov, Ruben-Gambino): 1e-9; Pelz-Good: 1e-5 relative (n > 1e5)
  // and 1e-4 where it is used for smaller n.
  int checked = 0;
  for (const auto& [key, value] : gs::testing::reference()) {
    if (key.rfind("kstwo.sf.", 0) != 0) continue;
    const std::string rest = key.substr(9);
    const auto dot = rest.find('.');
    const auto n = std::stoull(rest.substr(0, dot));
    const double d = std::stod(rest.substr(dot + 1));
    const double tol = n <= 140 ? 1e-9 : (n * std::pow(d, 1.5) <= 1.4 && n <= 100000 ? 1e-9 : 1e-4);
    EXPECT_TRUE(near_rel(gs::fitting::ks_pvalue(d, n), value, d * d * n >= 2.2 ? 1e-7 : tol))
        << "n=" << n << " d=" << d;
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

TEST(Goodness, KsPvalueEdges) {
  EXPECT_EQ(gs::fitting::ks_pvalue(0.0, 10), 1.0);
  EXPECT_EQ(gs::fitting::ks_pvalue(1.0, 10), 0.0);
  EXPECT_EQ(gs::fitting::ks_pvalue(0.04, 10), 1.0);                       // below the smallest possible D = 1/(2n)
  EXPECT_TRUE(near_rel(gs::fitting::ks_pvalue(0.9, 1), 0.1 * 2, 1e-12));  // n = 1: P(D > d) = 2 (1 - d)
  EXPECT_THROW(gs::fitting::ks_pvalue(0.1, 0), gs::Error);
  EXPECT_THROW(gs::fitting::ks_statistic(gs::fitting::Exponential(1.0), std::vector<double>{}), gs::Error);
  EXPECT_THROW(gs::fitting::ks_statistic(gs::fitting::Exponential(1.0), std::vector<double>{2.0, 1.0}), gs::Error);
}

TEST(Goodness, AndersonDarlingDetectsOutOfSupportAndMisfit) {
  const std::vector<double> x = {0.5, 1.0, 5.0};
  EXPECT_TRUE(std::isinf(gs::fitting::ad_statistic(gs::fitting::GeneralizedPareto(-0.5, 1.0), x)));  // upper = 2
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> e(1.0);
  std::vector<double> s(5000);
  for (auto& v : s) v = e(rng);
  std::sort(s.begin(), s.end());
  const double good = gs::fitting::ad_statistic(gs::fitting::Exponential(1.0), s);
  const double bad = gs::fitting::ad_statistic(gs::fitting::Gamma(3.0, 1.0 / 3.0), s);
  EXPECT_LT(good, 3.0);
  EXPECT_GT(bad, 100.0);
}

TEST(Goodness, LikelihoodsAndAic) {
  std::vector<float> v = {0.1f, 0.4f, 1.3f, 0.05f, 2.2f};
  gs::testing::NaivePasses passes(v);
  const auto s = passes.stats();
  const gs::fitting::GeneralizedPareto gp(0.2, 0.6);
  double direct = 0.0;
  for (float x : v) direct += logpdf(gp, double(x));
  EXPECT_TRUE(near_rel(gs::fitting::loglik(gp, passes), direct, 1e-13));
  const gs::fitting::GeneralizedPareto bounded(-0.5, 1.0);  // upper 2 < 2.2
  EXPECT_TRUE(std::isinf(gs::fitting::loglik(bounded, passes)));
  const gs::fitting::GeneralizedPareto flat(0.0, 0.6);
  direct = 0.0;
  for (float x : v) direct += logpdf(flat, double(x));
  EXPECT_TRUE(near_rel(gs::fitting::loglik(flat, passes), direct, 1e-13));
  const gs::fitting::Gamma g(0.8, 0.9);
  direct = 0.0;
  for (float x : v) direct += logpdf(g, double(x));
  EXPECT_TRUE(near_rel(gs::fitting::loglik(g, s), direct, 1e-13));
  EXPECT_TRUE(near_rel(gs::fitting::loglik(gs::fitting::Sid(g), passes, s), direct, 1e-13));
  EXPECT_DOUBLE_EQ(gs::fitting::aic(-10.0, 2), 24.0);
}

TEST(Goodness, TailCheckCountsAboveTheFittedThreshold) {
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> e(1.0 / 0.3);
  std::vector<float> v(100000);
  for (auto& x : v) x = float(e(rng));
  for (std::size_t i = 0; i < v.size(); i += 10) v[i] = 0.0f;  // 10% zeros
  gs::testing::NaivePasses passes(v);
  const auto s = passes.stats();
  const gs::fitting::Sid d = gs::fitting::fit_exponential(s);
  for (double density : {0.1, 0.01, 0.001}) {
    const auto c = gs::fitting::tail_check(d, passes, s, density);
    EXPECT_DOUBLE_EQ(c.predicted, 1e5 * density);
    EXPECT_NEAR(double(c.observed), c.predicted, 5.0 * std::sqrt(c.predicted));
  }
  // Density 1 (the whole vector, as every compressor takes it): the threshold is 0 and every
  // non-zero value lies above it; outside (0, 1] is refused.
  const auto all = gs::fitting::tail_check(d, passes, s, 1.0);
  EXPECT_EQ(all.threshold, 0.0);
  EXPECT_DOUBLE_EQ(all.predicted, 1e5);
  EXPECT_EQ(all.observed, 90000u);
  EXPECT_THROW(gs::fitting::tail_check(d, passes, s, 1.5), gs::Error);
  EXPECT_THROW(gs::fitting::tail_check(d, passes, s, 0.0), gs::Error);
}

TEST(Goodness, QqPointsFollowTheLawOnItsOwnSample) {
  std::mt19937_64 rng(9);
  std::gamma_distribution<double> g(0.5, 2.0);
  std::vector<double> s(200000);
  for (auto& v : s) v = g(rng);
  std::sort(s.begin(), s.end());
  const auto qq = gs::fitting::qq_points(gs::fitting::Gamma(0.5, 2.0), s, 9);
  ASSERT_EQ(qq.size(), 9u);
  EXPECT_DOUBLE_EQ(qq[4].probability, 0.5);
  for (const auto& p : qq) EXPECT_NEAR(p.sample, p.fitted, 0.03 * p.fitted + 1e-3) << p.probability;
}

// The one-pass, chunked (and above 131072 points parallel) statistics equal a plain serial
// evaluation of the textbook formulas with the separate cdf/log_cdf/log_sf functions.
TEST(Goodness, EdfStatisticsMatchSerialFormulasOnLargeSamples) {
  std::mt19937_64 rng(23);
  std::gamma_distribution<double> gd(0.6, 0.01);
  std::vector<double> x(300007);
  for (auto& v : x) v = gd(rng);
  std::sort(x.begin(), x.end());
  const std::vector<gs::fitting::Sid> laws = {gs::fitting::Exponential(0.006), gs::fitting::Gamma(0.62, 0.0098),
                                              gs::fitting::GeneralizedPareto(0.2, 0.005),
                                              gs::fitting::Normal(0.006, 0.008)};
  for (const gs::fitting::Sid& d : laws) {
    SCOPED_TRACE(std::string(gs::fitting::name(d)));
    const double m = double(x.size());
    double dmax = 0.0;
    long double s = 0.0L;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double f = gs::fitting::cdf(d, x[i]);
      dmax = std::max({dmax, double(i + 1) / m - f, f - double(i) / m});
      s += (2.0 * double(i) + 1.0) * (gs::fitting::log_cdf(d, x[i]) + gs::fitting::log_sf(d, x[x.size() - 1 - i]));
    }
    const double a2 = double(-static_cast<long double>(m) - s / static_cast<long double>(m));
    const gs::fitting::EdfStatistics e = gs::fitting::edf_statistics(d, x);
    EXPECT_NEAR(e.ks_D, dmax, 1e-13);
    EXPECT_TRUE(near_rel(e.ad_A2, a2, 1e-9));
    EXPECT_GT(e.ks_D, 0.0);
    EXPECT_EQ(gs::fitting::ks_statistic(d, x), e.ks_D);
    EXPECT_EQ(gs::fitting::ad_statistic(d, x), e.ad_A2);
  }
  EXPECT_THROW(gs::fitting::edf_statistics(gs::fitting::Exponential(1.0), std::vector<double>{}), gs::Error);
  EXPECT_THROW(gs::fitting::edf_statistics(gs::fitting::Exponential(1.0), std::vector<double>{1.0, 0.5}), gs::Error);
}

}  // namespace

namespace {

// Interpolating the law between dense sorted points (the default) against evaluating it at every
// point, on samples spanning many octaves like gradient magnitudes, with repeated values, and on
// laws chosen to be hard for the interpolants: a steep normal, a bounded generalized Pareto with
// points at its end, gamma shapes below and above 1.
TEST(Goodness, InterpolatedEdfStatisticsEqualPointByPointOnes) {
  std::mt19937_64 rng(29);
  std::vector<double> spread(400000);
  std::lognormal_distribution<double> ln(-9.0, 2.0);
  for (auto& v : spread) v = double(float(ln(rng)));  // float values, so some repeat
  std::sort(spread.begin(), spread.end());
  std::vector<double> narrow(200000);
  std::normal_distribution<double> nd(1.0, 1e-4);
  for (auto& v : narrow) v = nd(rng);
  std::sort(narrow.begin(), narrow.end());
  std::vector<double> bounded(200000);
  std::uniform_real_distribution<double> u(0.0, 2.0);
  for (auto& v : bounded) v = u(rng);
  bounded.back() = 2.0;  // the support's end of GeneralizedPareto(-0.5, 1)
  std::sort(bounded.begin(), bounded.end());
  // With the least share of points each case must take from the interpolants (the steep normal
  // turns from 0 to 1 within a few segments: the checks keep it exact; the bounded Pareto's ln S
  // falls to -inf at 2).
  struct Case {
    const std::vector<double>* x;
    gs::fitting::Sid law;
    double interpolated;
  };
  const std::vector<Case> cases = {
      {&spread, gs::fitting::Exponential(4e-4), 0.95},
      {&spread, gs::fitting::Gamma(0.3, 2e-3), 0.95},
      {&spread, gs::fitting::Gamma(3.0, 1e-4), 0.95},
      {&spread, gs::fitting::GeneralizedPareto(0.4, 1e-4), 0.95},
      {&spread, gs::fitting::GeneralizedPareto(-0.3, 2e-3), 0.95},
      {&spread, gs::fitting::Normal(2e-4, 3e-4), 0.95},
      {&narrow, gs::fitting::Normal(1.0, 1e-4), 0.0},
      {&narrow, gs::fitting::Gamma(2.0, 0.5), 0.95},
      {&bounded, gs::fitting::GeneralizedPareto(-0.5, 1.0), 0.7},
      {&bounded, gs::fitting::Normal(1.0, 0.5), 0.95},
  };
  for (const auto& [x, d, share] : cases) {
    SCOPED_TRACE(std::string(gs::fitting::name(d)) + " " + std::to_string(x->size()));
    const gs::fitting::EdfStatistics fast = gs::fitting::edf_statistics(d, *x);
    const gs::fitting::EdfStatistics exact = gs::fitting::edf_statistics(d, *x, gs::fitting::EdfEvaluation::exact);
    EXPECT_EQ(exact.interpolated, 0u);
    EXPECT_GE(double(fast.interpolated), share * double(x->size()));
    EXPECT_NEAR(fast.ks_D, exact.ks_D, 1e-12);
    if (std::isinf(exact.ad_A2)) {
      EXPECT_EQ(fast.ad_A2, exact.ad_A2);
    } else {
      EXPECT_NEAR(fast.ad_A2, exact.ad_A2, 1e-10 * std::max(1.0, std::fabs(exact.ad_A2)));
    }
  }
}

// Beyond 2 n d^2 = 746 Massart's bound puts P(D_n > d) below half the smallest subnormal: the
// p-value is 0 without the n-term sum, and the sum agrees; just inside, it is positive and within
// the bound.
TEST(Goodness, KsPvalueBeyondMassartsBoundIsZero) {
  const std::uint64_t n = 1000000;
  const double beyond = std::sqrt(750.0 / (2.0 * double(n)));
  EXPECT_EQ(gs::fitting::ks_pvalue(beyond, n), 0.0);
  EXPECT_EQ(2.0 * gs::fitting::smirnov_sf(n, beyond), 0.0);
  const double inside = std::sqrt(600.0 / (2.0 * double(n)));
  const double p = gs::fitting::ks_pvalue(inside, n);
  EXPECT_GT(p, 0.0);
  EXPECT_LE(p, 2.0 * std::exp(-600.0));
}

}  // namespace
