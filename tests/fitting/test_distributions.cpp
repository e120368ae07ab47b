// Distributions against scipy spot values deep in the tails, identities and parameter checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "gs/base/error.hpp"
#include "gs/fitting/distributions.hpp"
#include "gs/fitting/formulas.hpp"
#include "reference.hpp"

namespace {
using gs::testing::near_rel;
using gs::testing::ref_value;

// Checks every function the reference holds for one law. Tolerances: quantiles and densities
// 1e-11 relative for closed forms, 1e-9 for gamma (Boost's inverse vs scipy's cephes).
template <class D>
void check_law(const std::string& name, const D& d, double tol) {
  for (const auto& [key, q] : gs::testing::reference_probabilities()) {
    SCOPED_TRACE(name + " q=" + key);
    const double x = ref_value(name + ".isf." + key);
    EXPECT_TRUE(near_rel(quantile(complement(d, q)), x, tol));
    EXPECT_TRUE(near_rel(quantile(d, q), ref_value(name + ".ppf." + key), tol));
    EXPECT_TRUE(near_rel(pdf(d, x), ref_value(name + ".pdf@isf." + key), tol));
    EXPECT_TRUE(near_rel(logpdf(d, x), ref_value(name + ".logpdf@isf." + key), tol));
    EXPECT_TRUE(near_rel(cdf(complement(d, x)), ref_value(name + ".sf@isf." + key), tol));
    EXPECT_TRUE(near_rel(cdf(d, x), ref_value(name + ".cdf@isf." + key), tol));
    EXPECT_TRUE(near_rel(log_cdf(complement(d, x)), ref_value(name + ".logsf@isf." + key), tol));
    // ln F near 0: scipy takes log(cdf) and loses digits there; compare absolutely at 1e-15.
    EXPECT_NEAR(log_cdf(d, x), ref_value(name + ".logcdf@isf." + key),
                std::max(1e-15, tol * std::fabs(ref_value(name + ".logcdf@isf." + key))));
    const double xl = ref_value(name + ".ppf." + key);
    EXPECT_TRUE(near_rel(cdf(d, xl), ref_value(name + ".cdf@ppf." + key), tol));
    EXPECT_TRUE(near_rel(log_cdf(d, xl), ref_value(name + ".logcdf@ppf." + key), tol));
    EXPECT_NEAR(log_cdf(complement(d, xl)), ref_value(name + ".logsf@ppf." + key),
                std::max(1e-15, tol * std::fabs(ref_value(name + ".logsf@ppf." + key))));
  }
}

TEST(Distributions, ExponentialMatchesScipy) { check_law("exponential", gs::fitting::Exponential(0.37), 1e-12); }
TEST(Distributions, GammaSmallShapeMatchesScipy) { check_law("gamma_a0.35", gs::fitting::Gamma(0.35, 2.5), 1e-9); }
TEST(Distributions, GammaLargeShapeMatchesScipy) { check_law("gamma_a4", gs::fitting::Gamma(4.0, 0.5), 1e-9); }
TEST(Distributions, GeneralizedParetoHeavyTailMatchesScipy) {
  check_law("gpareto_xi0.3", gs::fitting::GeneralizedPareto(0.3, 1.7), 1e-11);
}
TEST(Distributions, GeneralizedParetoBoundedMatchesScipy) {
  check_law("gpareto_xi-0.25", gs::fitting::GeneralizedPareto(-0.25, 2.0), 1e-11);
}
TEST(Distributions, GeneralizedParetoNearZeroShapeMatchesScipy) {
  check_law("gpareto_xi1e-9", gs::fitting::GeneralizedPareto(1e-9, 1.3), 1e-11);
}
TEST(Distributions, NormalMatchesScipy) { check_law("normal", gs::fitting::Normal(0.4, 1.3), 1e-11); }
TEST(Distributions, LaplaceMatchesScipy) { check_law("laplace", gs::fitting::Laplace(-0.2, 0.8), 1e-12); }

TEST(Distributions, GeneralizedParetoTendsToExponentialAsShapeVanishes) {
  const gs::fitting::Exponential e(1.3);
  for (double xi : {0.0, 1e-14, -1e-14, 1e-10}) {
    const gs::fitting::GeneralizedPareto g(xi, 1.3);
    for (double q : {0.3, 1e-3, 1e-7}) {
      EXPECT_TRUE(near_rel(quantile(complement(g, q)), quantile(complement(e, q)), 1e-8)) << xi;
      const double x = quantile(complement(e, q));
      EXPECT_TRUE(near_rel(cdf(complement(g, x)), q, 1e-6)) << xi;  // xi*x/sigma ~ 2e-9
      EXPECT_TRUE(near_rel(logpdf(g, x), logpdf(e, x), 1e-8)) << xi;
    }
  }
}

TEST(Distributions, BoundedGeneralizedParetoSupport) {
  const gs::fitting::GeneralizedPareto g(-0.5, 2.0);  // support [0, 4]
  EXPECT_DOUBLE_EQ(g.upper(), 4.0);
  EXPECT_EQ(cdf(g, 5.0), 1.0);
  EXPECT_EQ(cdf(complement(g, 5.0)), 0.0);
  EXPECT_EQ(pdf(g, 5.0), 0.0);
  EXPECT_EQ(quantile(complement(g, 0.0)), 4.0);
  EXPECT_EQ(cdf(g, -1.0), 0.0);
  EXPECT_TRUE(std::isinf(gs::fitting::GeneralizedPareto(0.2, 1.0).upper()));
}

TEST(Distributions, ComplementsKeepDigitsThatOneMinusLoses) {
  // 1 - 1e-17 == 1 in double: only the complement form gets the tail.
  const gs::fitting::Exponential e(2.0);
  EXPECT_TRUE(near_rel(quantile(complement(e, 1e-17)), -2.0 * std::log(1e-17), 1e-14));
  const gs::fitting::Gamma g(0.5, 1.0);
  const double x = quantile(complement(g, 1e-17));
  EXPECT_TRUE(near_rel(cdf(complement(g, x)), 1e-17, 1e-10));
  const gs::fitting::Normal n(0.0, 1.0);
  EXPECT_TRUE(near_rel(log_cdf(n, -40.0), log_cdf(complement(n, 40.0)), 1e-14));
  EXPECT_TRUE(near_rel(log_cdf(n, -40.0), -804.608442013754, 1e-9));  // mpmath: log(ndtr(-40))
}

TEST(Distributions, QuantileInvertsCdfRoundTrip) {
  const gs::fitting::Gamma g(0.7, 1.9);
  const gs::fitting::GeneralizedPareto p(0.15, 0.4);
  for (double q : {0.9, 0.5, 0.01, 1e-6}) {
    EXPECT_TRUE(near_rel(cdf(complement(g, quantile(complement(g, q)))), q, 1e-10));
    EXPECT_TRUE(near_rel(cdf(complement(p, quantile(complement(p, q)))), q, 1e-12));
    EXPECT_TRUE(near_rel(cdf(g, quantile(g, q)), q, 1e-10));
  }
}

TEST(Distributions, DeviceFormulasAgreeWithValueTypes) {
  EXPECT_DOUBLE_EQ(gs::fitting::formula::exponential_quantile_c(1e-3, 0.5),
                   quantile(complement(gs::fitting::Exponential(0.5), 1e-3)));
  EXPECT_DOUBLE_EQ(gs::fitting::formula::gpareto_quantile_c(1e-3, 0.2, 0.5),
                   quantile(complement(gs::fitting::GeneralizedPareto(0.2, 0.5), 1e-3)));
  EXPECT_TRUE(near_rel(gs::fitting::formula::normal_quantile_c(0.025, 0.0, 1.0), 1.959963984540054, 1e-14));
  EXPECT_TRUE(near_rel(gs::fitting::formula::normal_quantile(0.025, 1.0, 2.0), 1.0 - 2.0 * 1.959963984540054, 1e-14));
}

TEST(Distributions, MomentsOfTheLaws) {
  EXPECT_DOUBLE_EQ(mean(gs::fitting::Gamma(2.0, 3.0)), 6.0);
  EXPECT_DOUBLE_EQ(variance(gs::fitting::Gamma(2.0, 3.0)), 18.0);
  EXPECT_DOUBLE_EQ(mean(gs::fitting::GeneralizedPareto(0.5, 1.0)), 2.0);
  EXPECT_TRUE(std::isinf(variance(gs::fitting::GeneralizedPareto(0.5, 1.0))));
  EXPECT_DOUBLE_EQ(variance(gs::fitting::Laplace(0.0, 2.0)), 8.0);
}

TEST(Distributions, BadParametersThrow) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW((gs::fitting::Exponential{0.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Exponential{-1.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Exponential{nan}), gs::Error);
  EXPECT_THROW((gs::fitting::Gamma{0.0, 1.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Gamma{1.0, inf}), gs::Error);
  EXPECT_THROW((gs::fitting::GeneralizedPareto{nan, 1.0}), gs::Error);
  EXPECT_THROW((gs::fitting::GeneralizedPareto{0.1, 0.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Normal{inf, 1.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Normal{0.0, -1.0}), gs::Error);
  EXPECT_THROW((gs::fitting::Laplace{0.0, 0.0}), gs::Error);
  EXPECT_THROW(quantile(gs::fitting::Exponential(1.0), 1.5), gs::Error);
  EXPECT_THROW(quantile(complement(gs::fitting::Gamma(1.0, 1.0), -0.1)), gs::Error);
  EXPECT_THROW(quantile(complement(gs::fitting::Normal(0.0, 1.0), nan)), gs::Error);
}

TEST(Distributions, ProbabilityEndpoints) {
  EXPECT_TRUE(std::isinf(quantile(complement(gs::fitting::Gamma(0.5, 1.0), 0.0))));
  EXPECT_EQ(quantile(complement(gs::fitting::Gamma(0.5, 1.0), 1.0)), 0.0);
  EXPECT_TRUE(std::isinf(quantile(gs::fitting::Exponential(1.0), 1.0)));
  EXPECT_EQ(quantile(gs::fitting::Exponential(1.0), 0.0), 0.0);
}

TEST(Distributions, SidNamesAndParameters) {
  const gs::fitting::Sid g = gs::fitting::Gamma(0.5, 2.0);
  EXPECT_EQ(name(g), "gamma");
  const auto p = params(g);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, "alpha");
  EXPECT_EQ(p[1].first, "beta");
  EXPECT_EQ(p[1].second, 2.0);
  EXPECT_EQ(name(gs::fitting::Sid(gs::fitting::GeneralizedPareto(0.1, 1.0))), "gpareto");
  EXPECT_EQ(params(gs::fitting::Sid(gs::fitting::GeneralizedPareto(0.1, 1.0)))[1].first, "sigma");
  EXPECT_EQ(parameter_count(gs::fitting::Sid(gs::fitting::Exponential(1.0))), 1);
  EXPECT_EQ(params(gs::fitting::Sid(gs::fitting::Normal(0.0, 1.0)))[0].first, "mu");
}

// cdf_point gives the same three values as the separate functions, in the bulk and both tails.
template <class D>
void check_cdf_point(const D& d, double tol) {
  for (const auto& [key, q] : gs::testing::reference_probabilities()) {
    for (const double x : {quantile(d, q), quantile(complement(d, q))}) {
      SCOPED_TRACE(key + " x=" + std::to_string(x));
      const gs::fitting::CdfPoint p = cdf_point(gs::fitting::Sid(d), x);
      EXPECT_TRUE(near_rel(p.cdf, cdf(d, x), tol));
      EXPECT_TRUE(near_rel(p.log_cdf, log_cdf(d, x), tol));
      EXPECT_TRUE(near_rel(p.log_sf, log_cdf(complement(d, x)), tol));
    }
  }
  const gs::fitting::CdfPoint at0 = cdf_point(gs::fitting::Sid(d), 0.0);
  if (!std::is_same_v<D, gs::fitting::Normal>) {
    EXPECT_EQ(at0.cdf, 0.0);
    EXPECT_EQ(at0.log_cdf, -std::numeric_limits<double>::infinity());
    EXPECT_EQ(at0.log_sf, 0.0);
  }
}

TEST(Distributions, CdfPointAgreesWithTheSeparateFunctions) {
  check_cdf_point(gs::fitting::Exponential(0.37), 1e-15);
  check_cdf_point(gs::fitting::Gamma(0.35, 2.5), 1e-13);  // p from 1 - q or directly: a few ulps
  check_cdf_point(gs::fitting::Gamma(4.0, 0.5), 1e-13);
  check_cdf_point(gs::fitting::Gamma(60.0, 0.01), 1e-12);
  check_cdf_point(gs::fitting::GeneralizedPareto(0.4, 1.5), 1e-15);
  check_cdf_point(gs::fitting::GeneralizedPareto(-0.3, 0.7), 1e-15);
  check_cdf_point(gs::fitting::Normal(0.4, 1.3), 1e-15);
  // Far tails: underflowed P or Q fall back to the leading terms, as log_cdf does.
  const gs::fitting::Gamma g(0.6, 1.0);
  for (double x : {1e-300, 1e-200, 800.0, 1e4}) {
    const gs::fitting::CdfPoint p = cdf_point(gs::fitting::Sid(g), x);
    EXPECT_TRUE(near_rel(p.log_cdf, log_cdf(g, x), 1e-12)) << x;
    EXPECT_TRUE(near_rel(p.log_sf, log_cdf(complement(g, x)), 1e-12)) << x;
    EXPECT_TRUE(std::isfinite(p.log_cdf) && std::isfinite(p.log_sf)) << x;
  }
  const gs::fitting::Normal n(0.0, 1.0);
  for (double x : {-40.0, 40.0}) {
    const gs::fitting::CdfPoint p = cdf_point(gs::fitting::Sid(n), x);
    EXPECT_TRUE(near_rel(p.log_cdf, log_cdf(n, x), 1e-14)) << x;
    EXPECT_TRUE(near_rel(p.log_sf, log_cdf(complement(n, x)), 1e-14)) << x;
  }
}

}  // namespace
