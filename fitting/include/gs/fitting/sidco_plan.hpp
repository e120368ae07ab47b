#pragma once
// SIDCo's stage logic as plain data and GS_HD steps over the statistics of a pass: the one
// implementation that gs::fitting::SidcoStages runs on the host and the CUDA backend's resident
// selection (kernels/src/portable/resident.hpp) runs on the device, where the statistics are
// made, so that no stage's sums cross the bus. The steps never throw: a fit that cannot be made
// leaves `failure` set (SidcoStages turns it into the fit's gs::Error; the device falls back to
// exact top-k, as the compressors do on the host).
#include <cmath>
#include <cstdint>

#include "gs/fitting/formulas.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/base/hostdevice.hpp"

namespace gs::fitting {

enum class SidcoVariant { exponential, pareto, gamma_pareto };  // SIDCo-E, -P, -GP

// Stage 1 aims at this density when more stages follow.
inline constexpr double kSidcoFirstStageDensity = 0.25;

// Why stage 1's fit failed (SidcoPlan::failure).
enum class SidcoFitFailure : int { none = 0, exponential, gpareto_moments, gamma_closed_form };

struct SidcoPlan {
  std::uint64_t n = 0;
  double density = 0.0;
  SidcoVariant variant = SidcoVariant::exponential;
  int stages = 1;
  bool recount = false;
  double eta = 0.0;         // the threshold so far
  int run = 0;              // stages run
  int tails_left = 0;       // tail stages still to run
  double di = 1.0;          // the density each tail stage aims at
  double expected = 0.0;    // exceedances the plan expects after the last stage
  double before_eta = 0.0;  // the threshold before eta and the count above it (< 0: none)
  double before_count = -1.0;
  // The last stage's threshold is multiplied by it: the calibration a carried estimate gives
  // (SidcoRule::scale; docs/algorithms.md, "SIDCo's estimate on the momentum-corrected
  // accumulator"). 1: the stages' own threshold.
  double scale = 1.0;
  SidcoFitFailure failure = SidcoFitFailure::none;
};

// k = max(1, floor(n * density)), at most n; 0 for n = 0 (the density is checked by the caller).
GS_HD inline std::uint64_t target_count_of(std::uint64_t n, double density) {
  if (n == 0) return 0;
  const auto k = static_cast<std::uint64_t>(::floor(double(n) * density));
  return k < 1 ? 1 : (k > n ? n : k);
}

GS_HD inline SidcoPlan sidco_plan(std::uint64_t n, double density, SidcoVariant variant, int stages, bool recount) {
  SidcoPlan p;
  p.n = n;
  p.density = density;
  p.variant = variant;
  p.stages = stages;
  p.recount = recount;
  return p;
}

// Whether stage 1's threshold is the final one (degenerate data aside).
GS_HD inline bool sidco_single_stage(const SidcoPlan& p) {
  return !(p.stages > 1 && p.density < kSidcoFirstStageDensity);
}

// Stage 1's law fitted to s (the non-zero x) and its threshold at density d; false (failure set)
// where the fit has no valid parameters.
GS_HD inline bool sidco_first_threshold(SidcoPlan& p, const MagnitudeStats& s, bool degenerate, double d) {
  const double m = s.mean();
  if (degenerate || p.variant == SidcoVariant::exponential) {
    if (!(m > 0.0 && m - m == 0.0)) return p.failure = SidcoFitFailure::exponential, false;
    p.eta = formula::exponential_quantile_c(d, m);
  } else if (p.variant == SidcoVariant::pareto) {
    double xi = 0.0, sigma = 0.0;
    if (!formula::gpareto_moments(m, s.variance(), xi, sigma))
      return p.failure = SidcoFitFailure::gpareto_moments, false;
    p.eta = formula::gpareto_quantile_c(d, xi, sigma);
  } else {
    const double v = ::log(m) - s.mean_log();
    const double alpha = v > 0.0 && v - v == 0.0 ? formula::gamma_closed_form_shape(v) : 0.0;
    const double beta = alpha > 0.0 ? m / alpha : 0.0;
    if (!(alpha > 0.0 && alpha - alpha == 0.0 && beta > 0.0 && beta - beta == 0.0))
      return p.failure = SidcoFitFailure::gamma_closed_form, false;
    p.eta = formula::gamma_quantile_c(d, alpha, beta);
  }
  return true;
}

// The stages are done: eta becomes the final threshold, times the plan's scale. Returns false
// (no stage follows), for the stage steps to return.
GS_HD inline bool sidco_last(SidcoPlan& p) {
  p.tails_left = 0;
  p.eta *= p.scale;
  return false;
}

// Stage 1 from the statistics of all x; true when a tail stage follows. Zeros are excluded from
// the fit, so it aims at the same d1*n elements among the non-zero values.
GS_HD inline bool sidco_first(SidcoPlan& p, const MagnitudeStats& s) {
  p.eta = 0.0;
  p.run = 0;
  p.tails_left = 0;
  p.before_count = -1.0;
  p.failure = SidcoFitFailure::none;
  if (s.count == 0) return false;  // nothing non-zero to keep
  const bool multi = !sidco_single_stage(p);
  const double d1 = multi ? kSidcoFirstStageDensity : p.density;
  const double d1_nonzero = d1 * double(p.n) / double(s.count);
  p.run = 1;
  if (d1_nonzero >= 1.0) {
    // Stage 1 would keep every non-zero value (a vector mostly of exact zeros): it keeps them
    // (eta = 0); the tail stages go from that count to the target, unless it keeps them all.
    const double target = p.density * double(p.n);
    if (!multi || target >= double(s.count)) return false;
    p.di = ::pow(target / double(s.count), 1.0 / double(p.stages - 1));
    p.expected = double(s.count);
    p.tails_left = p.stages - 1;
    return true;
  }
  const bool degenerate = s.count < 2 || !(s.max > s.min);
  p.before_eta = 0.0;  // every non-zero value lies above 0
  p.before_count = double(s.count);
  if (!sidco_first_threshold(p, s, degenerate, d1_nonzero)) return false;
  if (!multi || degenerate) return sidco_last(p);
  p.di = ::pow(p.density / kSidcoFirstStageDensity, 1.0 / double(p.stages - 1));
  p.expected = d1 * double(p.n);
  p.tails_left = p.stages - 1;
  return true;
}

// One tail stage from the statistics of y = x - eta over x > eta (peaks over threshold, shifted
// again by their minimum, as the reference); true when another follows.
GS_HD inline bool sidco_tail(SidcoPlan& p, const MagnitudeStats& y) {
  if (p.tails_left <= 0) return false;
  if (y.count < 2 || !(y.max > y.min)) return sidco_last(p);
  const double t = y.min;
  const double m = y.mean() - t;
  p.expected *= p.di;
  // recount: aim at the planned count rather than at di of what the last stage left.
  const double want = p.expected / double(y.count);
  const double d = p.recount ? (want < 1.0 ? want : 1.0) : p.di;
  if (d >= 1.0) return sidco_last(p);
  double tail = 0.0;
  if (p.variant == SidcoVariant::exponential) {
    tail = formula::exponential_quantile_c(d, m);
  } else {
    double xi = 0.0, sigma = 0.0;
    formula::gpareto_moments(m, y.variance(), xi, sigma);  // as fitted: a zero variance gives inf/NaN
    tail = formula::gpareto_quantile_c(d, xi, sigma);
  }
  p.before_eta = p.eta;
  p.before_count = double(y.count);  // the values above eta this stage fitted
  p.eta = p.eta + t + tail;
  ++p.run;
  return --p.tails_left > 0 || sidco_last(p);
}

// The count correction's test: a selection of `count` outside [1/band, band] times the target.
GS_HD inline bool sidco_needs_correction(const SidcoPlan& p, std::uint64_t count, double band) {
  const double q = double(count) / double(target_count_of(p.n, p.density));
  return !(q * band >= 1.0 && q <= band);
}

// Where the count correction aims from outside [1/band, band] times the target k: the geometric
// middle of the half of the band it enters, k / sqrt(band) from below and k sqrt(band) from above.
// A step whose model of the tail holds lands there, inside the band; one that moves the count up to
// twice as far as its model says (in ln(count)) still lands inside. Under momentum correction both
// steps move it further than planned: the accumulator piles up just below the last step's
// threshold (docs/algorithms.md, "SIDCo's count correction").
GS_HD inline double sidco_correction_aim(const SidcoPlan& p, std::uint64_t count, double band) {
  const double k = double(target_count_of(p.n, p.density));
  return double(count) > k ? k * ::sqrt(band) : k / ::sqrt(band);
}

// Below the band: a secant step on ln(count) against the threshold, through the last threshold
// before eta and the count above it, aimed at sidco_correction_aim (SidcoStages::corrected); eta
// itself when none is known.
GS_HD inline double sidco_corrected_below(const SidcoPlan& p, double threshold, std::uint64_t count, double band) {
  if (!(p.before_count > 0.0 && threshold > p.before_eta)) return threshold;
  return formula::secant_log_count(p.before_eta, p.before_count, threshold, double(count),
                                   sidco_correction_aim(p, count, band));
}

// Above the band: an exponential step on the selection's own tail, t + b ln(count / aim), b the
// mean excess over t of the values above it, aimed at sidco_correction_aim (SidcoStages::corrected;
// the kernels' count correction moves up by it before any exact top-k). t itself when b is no
// positive number.
GS_HD inline double sidco_corrected_above(const SidcoPlan& p, double threshold, std::uint64_t count, double excess_mean,
                                          double band) {
  const double aim = sidco_correction_aim(p, count, band);
  if (!(excess_mean > 0.0 && excess_mean <= 1.7976931348623157e308) || !(double(count) > aim)) return threshold;
  return threshold + formula::exponential_quantile_c(aim / double(count), excess_mean);
}

}  // namespace gs::fitting
