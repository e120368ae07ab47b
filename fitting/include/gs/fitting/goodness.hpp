#pragma once
// Goodness of fit (algorithms.md section 5): log-likelihood and AIC, Kolmogorov-Smirnov D with
// its p-value, Anderson-Darling A^2 against any fitted law, tail checks and QQ points.
#include <cstdint>
#include <span>
#include <vector>

#include "gs/fitting/distributions.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"

namespace gs::fitting {

// Log-likelihood of the values summarised by s (closed forms from the sums).
double loglik(const Exponential& d, const MagnitudeStats& s);
double loglik(const Gamma& d, const MagnitudeStats& s);
double loglik(const Normal& d, const MagnitudeStats& s);
// Generalized Pareto over y = x - shift for finite x > threshold, through one gp_sums pass
// (two when xi < 0: the support end is checked against max y first). -inf when a value lies
// outside the support.
double loglik(const GeneralizedPareto& d, MagnitudePasses& passes, double threshold = 0.0, double shift = 0.0);
// Any SID over all non-zero finite x (s = passes.stats()).
double loglik(const Sid& d, MagnitudePasses& passes, const MagnitudeStats& s);
// AIC = 2 (free parameters) - 2 loglik.
double aic(double loglik, int parameters);

// KS statistic D = sup |F_n - F| on an ascending sample (gs::Error if empty or unsorted).
double ks_statistic(const Sid& d, std::span<const double> sorted);
// Kolmogorov's limiting distribution (scipy.stats.kstwobign): P(sqrt(n) D_n > x) as n -> inf.
// Series 2 sum (-1)^(k-1) exp(-2 k^2 x^2) for x >= 1, and 1 - the Jacobi-theta form
// sqrt(2 pi)/x sum exp(-(2k-1)^2 pi^2 / (8 x^2)) below.
double kolmogorov_sf(double x);
double kolmogorov_cdf(double x);
// P(D_n > d) for the two-sided one-sample statistic with n points (scipy.stats.kstwo.sf):
//   n d <= 1 and n d >= n - 1: Ruben-Gambino's exact forms;
//   d >= 0.5, or n d^2 >= 2.2 when n > 140 or >= 4 when n <= 140: 2 x one-sided Smirnov (exact
//     Birnbaum-Tingey sum; exact for d >= 0.5, relative error < 1e-6 otherwise);
//   n <= 140, or n <= 1e5 with n d^1.5 <= 1.4: exact, Durbin's matrix as Marsaglia-Tsang-Wang
//     compute it (scaled matrix power);
//   otherwise the Pelz-Good expansion to O(n^-3/2) (accuracy about 1e-5 and better as n grows).
double ks_pvalue(double d, std::uint64_t n);
// One-sided P(D_n^+ >= d) (scipy.special.smirnov), exact sum evaluated in logs.
double smirnov_sf(std::uint64_t n, double d);

// Anderson-Darling A^2 = -n - (1/n) sum (2i-1) [ln F(x_i) + ln(1 - F(x_{n+1-i}))] on an ascending
// sample, with ln F and ln(1-F) from the laws' careful log-cdf/log-sf. +inf when a point lies
// outside the law's support.
double ad_statistic(const Sid& d, std::span<const double> sorted);

// KS D and AD A^2 together from one evaluation of the law per point (cdf_point): what
// ks_statistic and ad_statistic return, at half the cost or less. Large samples run in parallel
// (OpenMP) over fixed chunks reduced in chunk order, so the result does not depend on the thread
// count. gs::Error if the sample is empty or unsorted.
//
// By default the law is interpolated where the sorted points are dense: in each segment of 1/128
// of a binary octave (1/128 to 1/256 of the values in it) holding 8 or more points, F, ln F and
// ln(1-F) come from quintic Hermite interpolants of the law's values, slopes and curvatures at
// the segment's ends, each checked against the law at the segment's middle, where the
// interpolation error peaks, to 1e-13 (absolute for F, relative for the logs; else the segment's
// points are evaluated one by one). D then moves by at most about 1e-13; A^2, a sum of m logs,
// could move by up to 4e-13 m times the mean |log| by that check alone, and moved by at most 1e-10
// relative in the tests (tests/fitting) and 8e-13 on a ResNet-50 step's layers (D: 3e-16).
// EdfEvaluation::exact evaluates the law at every point.
struct EdfStatistics {
  double ks_D = 0.0;
  double ad_A2 = 0.0;
  std::uint64_t interpolated = 0;  // points whose F, ln F, ln(1-F) came from the interpolants
};
enum class EdfEvaluation { interpolated, exact };
EdfStatistics edf_statistics(const Sid& d, std::span<const double> sorted,
                             EdfEvaluation how = EdfEvaluation::interpolated);

// Tail check for compression: predicted exceedances n*density vs the observed count of what the
// fitted eta = quantile(complement(d, density*n/count)) selects (count_selected: at or above it).
// The law describes the count non-zero finite values, so n*density of all n elements lie above
// eta when a fraction density*n/count of the non-zero ones do; eta = 0 when that fraction is 1 or
// more (density 1, or fewer non-zero values than n*density). density in (0, 1] (gs::Error
// otherwise).
struct TailCheck {
  double density = 0.0;
  double threshold = 0.0;
  double predicted = 0.0;  // n * density
  std::uint64_t observed = 0;
};
TailCheck tail_check(const Sid& d, MagnitudePasses& passes, const MagnitudeStats& s, double density);

// QQ points at fixed probabilities p_j = (j - 0.5)/points, j = 1..points: (fitted quantile,
// sample quantile) with the sample quantile by linear interpolation at position p_j*(m-1).
struct QQPoint {
  double probability = 0.0;
  double fitted = 0.0;
  double sample = 0.0;
};
std::vector<QQPoint> qq_points(const Sid& d, std::span<const double> sorted, int points = 19);

}  // namespace gs::fitting
