#pragma once
// Estimators: free functions from sufficient statistics (MagnitudeStats) to a distribution.
// Zeros and non-finite values never enter MagnitudeStats' sums (see stats.hpp), so every fit here
// excludes them; callers report s.excluded(). Each throws gs::Error when the statistics cannot
// determine the law (too few values, all equal), saying so.
#include <span>

#include "gs/fitting/distributions.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"

namespace gs::fitting {

// Maximum likelihood: beta = mean(x). Needs count >= 1.
Exponential fit_exponential(const MagnitudeStats& s);

// Gamma closed form (algorithms.md): s = ln(mean) - mean(ln x); alpha from the approximation
// (3 - s + sqrt((s-3)^2 + 24 s)) / (12 s); beta = mean/alpha. Needs count >= 2 and s > 0
// (values not all equal).
Gamma fit_gamma_closed_form(const MagnitudeStats& s);
// Maximum likelihood (location 0): Newton on ln(a) - digamma(a) = s from the closed form, to full
// double accuracy; beta = mean/alpha.
Gamma fit_gamma_mle(const MagnitudeStats& s);

// Normal by maximum likelihood on x itself (population variance): the baseline SID, fitted to
// |g| like the others.
Normal fit_normal(const MagnitudeStats& s);
// Normal of the signed g over the same elements (mean sum_signed/N, sd from sum_sq), where N also
// counts the zeros (zeros are genuine gradient values): GaussianKSGD's view.
Normal fit_normal_signed(const MagnitudeStats& s);

// Generalized Pareto (location 0) by moments: m = mean, v = variance,
// xi = (1 - m^2/v)/2, sigma = m (1 + m^2/v)/2. Needs count >= 2 and v > 0.
GeneralizedPareto fit_gpareto_moments(const MagnitudeStats& s);

struct GpMleResult {
  GeneralizedPareto dist;
  double loglik;        // at the optimum, over the elements used
  std::uint64_t count;  // elements used
  int passes;           // gp_sums calls made
  bool converged;       // false: the best point was a boundary of the search (see below)
};
// Generalized Pareto by maximum likelihood (location 0) over y = x - shift for the finite x with
// x > threshold (threshold 0, shift 0: all non-zero x). Grimshaw's reduction: for theta = xi/sigma
// the likelihood is maximised in xi by xi(theta) = mean(ln(1 + theta*y)), leaving the profile
//   l*(theta) = -n (ln(xi(theta)/theta) + xi(theta) + 1)      (theta -> 0: the exponential)
// over theta in (-1/max y, inf). A log-spaced grid on both sides of 0 brackets the maximum, then
// Brent's method refines it. When the maximum sits at theta -> -1/max y (xi < -1, where the
// likelihood is unbounded) the best interior point is returned with converged = false.
// Needs at least 2 distinct values.
GpMleResult fit_gpareto_mle(MagnitudePasses& passes, double threshold = 0.0, double shift = 0.0);
// The same maximum with far fewer passes, given x values already in host memory in ascending order
// (passes.sorted_sample: all of them, or a uniform subsample). The search above runs on up to
// 131072 evenly spaced order statistics of the sample's x > threshold (no pass over the data); a
// safeguarded Newton iteration on the full data's profile (value and two derivatives from one
// gp_sums pass each) then polishes it, never accepting a step that lowers the likelihood: about
// 5 passes instead of about 100. A sample maximum at the end of the search range, or a Newton
// iteration that does not settle, falls back to the full search.
GpMleResult fit_gpareto_mle(MagnitudePasses& passes, std::span<const double> sorted_sample, double threshold = 0.0,
                            double shift = 0.0);

}  // namespace gs::fitting
