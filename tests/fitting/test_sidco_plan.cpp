// SIDCo's stage steps as the device runs them (gs/fitting/sidco_plan.hpp): the parts that differ
// from the host's only where the device cannot run Boost.Math (the gamma complement quantile), and
// the failure a step leaves where the host throws.
#include <gtest/gtest.h>

#include <boost/math/special_functions/gamma.hpp>
#include <cmath>

#include "gs/fitting/gamma_inv.hpp"
#include "gs/fitting/sidco_plan.hpp"
#include "gs/fitting/thresholds.hpp"

using namespace gs::fitting;

// The device's inverse of Q(a, x) against Boost.Math's over the shapes and tail densities SIDCo-GP's
// first stage meets (alpha from the closed form on gradient magnitudes: 0.2 to 50; q from the
// first stage's 0.25 to a single stage at 1e-4), to 1e-11 relative.
TEST(SidcoPlan, DeviceGammaQuantileMatchesBoost) {
  for (const double a : {0.05, 0.2, 0.5, 0.73, 1.0, 1.7, 3.0, 12.5, 50.0, 400.0})
    for (const double q : {0.9, 0.5, 0.25, 0.1, 0.01, 1e-3, 1e-4, 1e-7}) {
      const double want = boost::math::gamma_q_inv(a, q);
      const double got = formula::detail::gamma_q_inv_portable(a, q);
      EXPECT_NEAR(got, want, 1e-11 * want) << "a = " << a << ", q = " << q;
      EXPECT_NEAR(formula::detail::gamma_q_portable(a, want), q, 1e-12 + 1e-11 * q) << a << " " << q;
    }
  EXPECT_EQ(formula::detail::gamma_q_inv_portable(2.0, 1.0), 0.0);
  EXPECT_TRUE(std::isinf(formula::detail::gamma_q_inv_portable(2.0, 0.0)));
}

// A first stage whose fit has no valid parameters leaves a failure in the plan (the device falls
// back on it) where SidcoStages throws the fit's own error.
TEST(SidcoPlan, AFailedFitIsAFailureOnTheDeviceAndTheFitsErrorOnTheHost) {
  MagnitudeStats s;  // two values, 1 and 1 + 1e-17: max > min in name, variance 0 in doubles
  s.count = 2;
  s.sum = 2.0;
  s.sum_sq = 2.0;
  s.sum_log = 0.0;
  s.min = 1.0;
  s.max = std::nextafter(1.0, 2.0);
  SidcoPlan p = sidco_plan(100, 0.01, SidcoVariant::pareto, 1, false);
  EXPECT_FALSE(sidco_first(p, s));
  EXPECT_EQ(p.failure, SidcoFitFailure::gpareto_moments);
  SidcoStages host(100, 0.01, SidcoVariant::pareto, 1, false);
  try {
    host.first(s);
    ADD_FAILURE() << "the host's stage must throw";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fit_gpareto_moments"), std::string::npos) << e.what();
  }
  SidcoPlan g = sidco_plan(100, 0.01, SidcoVariant::gamma_pareto, 1, false);
  sidco_first(g, s);
  EXPECT_EQ(g.failure, SidcoFitFailure::gamma_closed_form);
}
