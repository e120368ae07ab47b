#pragma once
// Closed-form pdf/cdf/quantile formulas shared by host and device (GS_HD): the exponential, the
// generalized Pareto (location 0) and the normal. Tails are written through complements
// (expm1/log1p) so that a survival probability of 1e-7 keeps all its digits. No argument checks
// here: the value types in distributions.hpp validate parameters; these are the raw formulas.
#include <cmath>
#include <cstdint>

#include "gs/base/hostdevice.hpp"
#include "gs/fitting/gamma_inv.hpp"

namespace gs::fitting::formula {

// ---- exponential, scale beta, x >= 0 --------------------------------------------------------
GS_HD inline double exponential_logpdf(double x, double beta) { return x < 0.0 ? -INFINITY : -::log(beta) - x / beta; }
GS_HD inline double exponential_cdf(double x, double beta) { return x <= 0.0 ? 0.0 : -::expm1(-x / beta); }
GS_HD inline double exponential_sf(double x, double beta) { return x <= 0.0 ? 1.0 : ::exp(-x / beta); }
// x with P(X <= x) = p.
GS_HD inline double exponential_quantile(double p, double beta) { return -beta * ::log1p(-p); }
// x with P(X > x) = q: the SID threshold for density q.
GS_HD inline double exponential_quantile_c(double q, double beta) { return -beta * ::log(q); }

// ---- generalized Pareto, shape xi, scale sigma, location 0 -----------------------------------
// Support: x >= 0, and x <= -sigma/xi when xi < 0. For xi == 0 it is the exponential; the
// log1p/expm1 forms below are accurate for any small xi, so only xi == 0 needs its own branch.
GS_HD inline double gpareto_upper(double xi, double sigma) { return xi < 0.0 ? -sigma / xi : INFINITY; }
// ln P(X > x) for x inside the support.
GS_HD inline double gpareto_logsf_inside(double x, double xi, double sigma) {
  const double z = x / sigma;
  return xi == 0.0 ? -z : -::log1p(xi * z) / xi;
}
GS_HD inline double gpareto_logsf(double x, double xi, double sigma) {
  if (x <= 0.0) return 0.0;
  if (x >= gpareto_upper(xi, sigma)) return -INFINITY;
  return gpareto_logsf_inside(x, xi, sigma);
}
GS_HD inline double gpareto_sf(double x, double xi, double sigma) { return ::exp(gpareto_logsf(x, xi, sigma)); }
GS_HD inline double gpareto_cdf(double x, double xi, double sigma) { return -::expm1(gpareto_logsf(x, xi, sigma)); }
GS_HD inline double gpareto_logpdf(double x, double xi, double sigma) {
  if (x < 0.0 || x > gpareto_upper(xi, sigma)) return -INFINITY;
  const double z = x / sigma;
  if (xi == 0.0) return -::log(sigma) - z;
  if (x == gpareto_upper(xi, sigma)) return xi < -1.0 ? INFINITY : (xi == -1.0 ? -::log(sigma) : -INFINITY);
  return -::log(sigma) - (1.0 + 1.0 / xi) * ::log1p(xi * z);
}
// x with ln P(X > x) = logq (logq <= 0): sigma*(q^-xi - 1)/xi written as sigma*expm1(-xi ln q)/xi.
GS_HD inline double gpareto_quantile_logc(double logq, double xi, double sigma) {
  return xi == 0.0 ? -sigma * logq : sigma * ::expm1(-xi * logq) / xi;
}
GS_HD inline double gpareto_quantile_c(double q, double xi, double sigma) {
  return gpareto_quantile_logc(::log(q), xi, sigma);
}
GS_HD inline double gpareto_quantile(double p, double xi, double sigma) {
  return gpareto_quantile_logc(::log1p(-p), xi, sigma);
}

// The generalized Pareto fitted by moments to peaks of mean m and variance v: r = m^2/v,
// xi = (1 - r)/2, sigma = m (1 + r)/2; false where that gives no valid law (v = 0, sigma <= 0).
GS_HD inline bool gpareto_moments(double m, double v, double& xi, double& sigma) {
  const double r = m * m / v;
  xi = 0.5 * (1.0 - r);
  sigma = 0.5 * m * (1.0 + r);
  return v > 0.0 && xi - xi == 0.0 && sigma > 0.0 && sigma - sigma == 0.0;
}

// ---- normal ----------------------------------------------------------------------------------
GS_HD inline double normal_logpdf(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  return -0.5 * z * z - ::log(sigma) - 0.91893853320467274178;  // ln sqrt(2 pi)
}
GS_HD inline double normal_cdf(double x, double mu, double sigma) {
  return 0.5 * ::erfc(-(x - mu) / (sigma * 1.41421356237309504880));
}
GS_HD inline double normal_sf(double x, double mu, double sigma) {
  return 0.5 * ::erfc((x - mu) / (sigma * 1.41421356237309504880));
}

namespace detail {
double std_normal_quantile_c_host(double q);  // Boost.Math erfc_inv; defined in distributions.cpp
}
// z with P(Z > z) = q for the standard normal. Device: CUDA's erfcinv; host: Boost.Math.
GS_HD inline double std_normal_quantile_c(double q) {
#if defined(__CUDA_ARCH__)
  return 1.41421356237309504880 * erfcinv(2.0 * q);
#else
  return detail::std_normal_quantile_c_host(q);
#endif
}
GS_HD inline double normal_quantile_c(double q, double mu, double sigma) {
  return mu + sigma * std_normal_quantile_c(q);
}
GS_HD inline double normal_quantile(double p, double mu, double sigma) {
  return mu - sigma * std_normal_quantile_c(p);  // symmetry: Phi^-1(p) = -Phi^-1(1 - p)
}

// ---- gamma, shape alpha, scale beta ---------------------------------------------------------
// The closed-form shape estimate from s = ln(mean) - mean(ln x) > 0.
GS_HD inline double gamma_closed_form_shape(double s) {
  return (3.0 - s + ::sqrt((s - 3.0) * (s - 3.0) + 24.0 * s)) / (12.0 * s);
}
namespace detail {
double gamma_q_inv_host(double alpha, double q);  // Boost.Math gamma_q_inv; defined in distributions.cpp
}
// x with P(X > x) = q, 0 < q < 1. Device: gamma_q_inv_portable (gamma_inv.hpp); host: Boost.Math.
GS_HD inline double gamma_quantile_c(double q, double alpha, double beta) {
#if defined(__CUDA_ARCH__)
  return beta * detail::gamma_q_inv_portable(alpha, q);
#else
  return beta * detail::gamma_q_inv_host(alpha, q);
#endif
}

// ---- DGC's sampled threshold ----------------------------------------------------------------
// The rank of the threshold among m finite sample values at `density`: ceil(m density), at least
// 1, at most m.
GS_HD inline std::uint64_t dgc_sample_rank(std::uint64_t m, double density) {
  const double want = ::ceil(double(m) * density);
  const std::uint64_t kk = want < 1.0 ? 1 : std::uint64_t(want);
  return kk < m ? kk : m;
}
// Its hierarchical step: exact top-k when the threshold selects more than 4k/3.
GS_HD inline bool dgc_exact_step(std::uint64_t selected, std::uint64_t k) { return 3 * selected > 4 * k; }

// ---- sidco-topk's bound --------------------------------------------------------------------------
// How many of the sample's m finite values the bound must leave above it: the count expected
// above the density's quantile plus kSidcoTopkMarginSd standard deviations, the binomial one
// for independent values or more, as the sample's runs say (runs counts of values at or above
// that quantile, their sum and sum of squares: neighbours in a run are alike, so the count varies
// between runs more than independent values would).
inline constexpr double kSidcoTopkMarginSd = 4.0;
GS_HD inline std::uint64_t sidco_topk_needed(double expected, double density, std::uint64_t runs, double sum_c,
                                             double sum_cc) {
  const double run_var = runs > 1 ? (sum_cc - sum_c * sum_c / double(runs)) / double(runs - 1) : 0.0;
  const double binomial = ::sqrt(expected * (1.0 - density)), spread = ::sqrt(double(runs) * run_var);
  return std::uint64_t(::ceil(expected + kSidcoTopkMarginSd * (spread > binomial ? spread : binomial)));
}

// ---- SIDCo's count correction ----------------------------------------------------------------
// The threshold at which `target` values exceed it, from two thresholds t0 < t1 and the counts
// above them, c0 >= c1: a secant step on ln(count) against the threshold, exact when the tail
// above t0 is exponential (ln count is then linear in the threshold). A count of 0 counts as 1/2
// (the step still moves up from an empty selection). t1 itself when the points place no slope;
// never below 0.
GS_HD inline double secant_log_count(double t0, double c0, double t1, double c1, double target) {
  const double lc1 = ::log(c1 > 0.5 ? c1 : 0.5);
  const double slope = (lc1 - ::log(c0)) / (t1 - t0);
  if (!(t1 > t0) || !(c0 > 0.0) || !(slope < 0.0) || !(target > 0.0)) return t1;
  const double t = t1 + (::log(target) - lc1) / slope;
  return t > 0.0 ? t : 0.0;
}

// ---- selection ----------------------------------------------------------------------------------

// The bound x > bound that selects what a threshold selects (x >= threshold; a threshold of 0
// selects the non-zero x): the largest double below a positive threshold, so no float lies between
// the two (gs::fitting::selection_bound, thresholds.hpp, states the rule; host and device use this).
GS_HD inline double selection_bound(double threshold) {
  return threshold > 0.0 ? ::nextafter(threshold, 0.0) : threshold;
}

}  // namespace gs::fitting::formula
