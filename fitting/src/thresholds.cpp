// Thresholds: SID quantiles at density delta, SIDCo's multi-stage peaks-over-threshold refinement
// and the baselines' rules (algorithms.md sections 1, 2, 4).
#include "gs/fitting/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "gs/error.hpp"
#include "gs/fitting/estimators.hpp"
#include "gs/fitting/formulas.hpp"

namespace gs {
namespace {

constexpr double kFirstStageDensity = 0.25;

ThresholdResult finish(std::string method, MagnitudePasses& passes, double delta, double eta,
                       int stages) {
  ThresholdResult r;
  r.method = std::move(method);
  r.ratio = delta;
  r.threshold = eta;
  r.stages = stages;
  r.selected = passes.count_above(eta);
  r.quality = double(r.selected) / double(passes.size()) / delta;
  return r;
}

// Threshold at density d of the GP fitted by moments to peaks with the given mean and variance.
double gp_moment_tail(double m, double v, double d) {
  const double ratio = m * m / v;
  const double xi = 0.5 * (1.0 - ratio), sigma = 0.5 * m * (1.0 + ratio);
  return formula::gpareto_quantile_c(d, xi, sigma);
}

}  // namespace

std::uint64_t target_count(std::uint64_t n, double delta) {
  if (!(delta > 0.0 && delta < 1.0)) {
    std::ostringstream os;
    os << "density (ratio) must lie strictly between 0 and 1, got " << delta;
    throw Error(os.str());
  }
  if (n == 0) throw Error("no elements: a threshold needs a non-empty vector");
  const auto k = static_cast<std::uint64_t>(std::floor(double(n) * delta));
  return std::max<std::uint64_t>(1, k);
}

double sid_threshold(const Exponential& d, double delta) {
  target_count(1, delta);
  return quantile(complement(d, delta));
}
double sid_threshold(const Gamma& d, double delta) {
  target_count(1, delta);
  return quantile(complement(d, delta));
}
double sid_threshold(const GeneralizedPareto& d, double delta) {
  target_count(1, delta);
  return quantile(complement(d, delta));
}
double sid_threshold(const Sid& d, double delta) {
  target_count(1, delta);
  return quantile_c(d, delta);
}
double gamma_threshold_approx(const Gamma& d, double delta) {
  target_count(1, delta);
  return -d.beta() * (std::log(delta) + std::lgamma(d.alpha()));
}
double gaussian_threshold(const Normal& g, double delta) {
  target_count(1, delta);
  return g.mu() + formula::std_normal_quantile_c(0.5 * delta) * g.sigma();
}

std::string_view method_name(SidcoVariant v) {
  switch (v) {
    case SidcoVariant::exponential: return "sidco-e";
    case SidcoVariant::pareto: return "sidco-p";
    case SidcoVariant::gamma_pareto: return "sidco-gp";
  }
  return "sidco";
}

SidcoStages::SidcoStages(std::uint64_t n, double delta, SidcoVariant variant, int stages,
                         bool recount)
    : n_(n), delta_(delta), variant_(variant), stages_(stages), recount_(recount) {
  target_count(n, delta);
  if (stages < 1) throw Error("SIDCo: the number of stages must be at least 1");
}

StatsFields SidcoStages::first_fields() const {
  StatsFields f;
  f.sum_sq = variant_ == SidcoVariant::pareto;
  f.sum_log = variant_ == SidcoVariant::gamma_pareto;
  return f;
}

StatsFields SidcoStages::tail_fields() const {
  StatsFields f;
  f.sum_sq = variant_ != SidcoVariant::exponential;
  return f;
}

bool SidcoStages::single_stage() const { return !(stages_ > 1 && delta_ < kFirstStageDensity); }

bool SidcoStages::first(const MagnitudeStats& s) {
  eta_ = 0.0;
  run_ = 0;
  tails_left_ = 0;
  if (s.count == 0) return false;  // nothing non-zero to keep
  const bool multi = !single_stage();
  const double d1 = multi ? kFirstStageDensity : delta_;
  // The fit describes the non-zero values only: aim at the same d1*n elements among them.
  const double d1_nonzero = d1 * double(n_) / double(s.count);
  run_ = 1;
  if (d1_nonzero >= 1.0) return false;
  const bool degenerate = s.count < 2 || !(s.max > s.min);
  if (degenerate || variant_ == SidcoVariant::exponential) {
    eta_ = sid_threshold(fit_exponential(s), d1_nonzero);
  } else if (variant_ == SidcoVariant::pareto) {
    eta_ = sid_threshold(fit_gpareto_moments(s), d1_nonzero);
  } else {
    eta_ = sid_threshold(fit_gamma_closed_form(s), d1_nonzero);
  }
  if (!multi || degenerate) return false;
  di_ = std::pow(delta_ / kFirstStageDensity, 1.0 / double(stages_ - 1));
  expected_ = d1 * double(n_);  // exceedances the plan expects after each stage
  tails_left_ = stages_ - 1;
  return true;
}

bool SidcoStages::tail(const MagnitudeStats& y) {
  GS_ASSERT(tails_left_ > 0);
  // Peaks over eta, shifted by eta for precision; then by their minimum, as the reference.
  if (y.count < 2 || !(y.max > y.min)) return tails_left_ = 0, false;
  const double t = y.min;
  const double m = y.mean() - t;
  expected_ *= di_;
  // recount: aim at the planned count rather than at di of what the last stage left.
  const double d = recount_ ? std::min(1.0, expected_ / double(y.count)) : di_;
  if (d >= 1.0) return tails_left_ = 0, false;
  const double tail = variant_ == SidcoVariant::exponential ? formula::exponential_quantile_c(d, m)
                                                            : gp_moment_tail(m, y.variance(), d);
  eta_ = eta_ + t + tail;
  ++run_;
  return --tails_left_ > 0;
}

ThresholdResult sidco_estimate(MagnitudePasses& passes, double delta, SidcoVariant variant,
                               int stages, bool recount) {
  SidcoStages plan(passes.size(), delta, variant, stages, recount);
  bool more = plan.first(passes.stats_light(plan.first_fields()));
  while (more)
    more = plan.tail(passes.stats_above_light(plan.threshold(), plan.threshold(), plan.tail_fields()));
  ThresholdResult r;
  r.method = std::string(plan.name());
  r.ratio = delta;
  r.threshold = plan.threshold();
  r.stages = plan.stages_run();
  return r;
}

ThresholdResult sidco_threshold(MagnitudePasses& passes, double delta, SidcoVariant variant,
                                int stages, bool recount) {
  const ThresholdResult r = sidco_estimate(passes, delta, variant, stages, recount);
  return finish(r.method, passes, delta, r.threshold, r.stages);
}

ThresholdResult topk_threshold(MagnitudePasses& passes, double delta) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = target_count(n, delta);
  const MagnitudeStats s = passes.stats();
  const std::uint64_t finite = s.count + s.zeros;
  if (k > finite) {
    std::ostringstream os;
    os << "top-k: k = " << k << " exceeds the " << finite << " finite values (" << s.nonfinite
       << " non-finite): lower the ratio";
    throw Error(os.str());
  }
  ThresholdResult r;
  r.method = "topk";
  r.ratio = delta;
  r.threshold = passes.kth_largest(k);
  r.stages = 1;
  r.selected = k;
  r.quality = double(k) / double(n) / delta;
  return r;
}

ThresholdResult dgc_threshold(MagnitudePasses& passes, double delta, std::uint64_t seed) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = target_count(n, delta);
  const auto m = static_cast<std::uint64_t>(std::ceil(0.01 * double(n)));
  std::vector<float> sample = passes.random_sample(m, seed);
  std::erase_if(sample, [](float v) { return !std::isfinite(v); });
  if (sample.empty()) throw Error("DGC: the random sample holds no finite value");
  const auto kk = std::min<std::uint64_t>(
      sample.size(), std::max<std::uint64_t>(1, std::uint64_t(std::ceil(double(sample.size()) * delta))));
  std::nth_element(sample.begin(), sample.begin() + (kk - 1), sample.end(), std::greater<>());
  ThresholdResult r = finish("dgc", passes, delta, double(sample[kk - 1]), 1);
  if (3 * r.selected > 4 * k) {  // hierarchical step: exact top-k among the selection
    r.threshold = passes.kth_largest(k);
    r.selected = k;
    r.stages = 2;
    r.quality = double(k) / double(n) / delta;
  }
  return r;
}

ThresholdResult redsync_threshold(MagnitudePasses& passes, double delta) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = target_count(n, delta);
  const MagnitudeStats s = passes.stats();
  if (s.count == 0) return finish("redsync", passes, delta, 0.0, 0);
  const double mean = s.sum / double(s.count + s.zeros);
  double l = 0.0, r = 1.0, eta = mean;
  int steps = 0;
  while (r - l > 0.2) {
    const double t = 0.5 * (l + r);
    eta = mean + t * (s.max - mean);
    const std::uint64_t nnz = passes.count_above(eta);
    ++steps;
    if (nnz > k && nnz < 2 * k) break;
    if (2 * nnz < k) r = t; else l = t;
  }
  return finish("redsync", passes, delta, eta, steps);
}

ThresholdResult gaussianksgd_threshold(MagnitudePasses& passes, double delta) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = target_count(n, delta);
  double eta = gaussian_threshold(fit_normal_signed(passes.stats()), delta);
  int corrections = 0;
  for (; corrections < 3; ++corrections) {
    const std::uint64_t nnz = passes.count_above(eta);
    if (3 * nnz < 2 * k) eta *= 0.5;
    else if (3 * nnz > 4 * k) eta *= 1.5;
    else break;
  }
  return finish("gaussianksgd", passes, delta, eta, 1 + corrections);
}

ThresholdResult threshold_by_name(std::string_view method, MagnitudePasses& passes, double delta,
                                  int stages, std::uint64_t seed, bool recount) {
  if (method == "topk") return topk_threshold(passes, delta);
  if (method == "sidco-e") return sidco_threshold(passes, delta, SidcoVariant::exponential, stages, recount);
  if (method == "sidco-p") return sidco_threshold(passes, delta, SidcoVariant::pareto, stages, recount);
  if (method == "sidco-gp") return sidco_threshold(passes, delta, SidcoVariant::gamma_pareto, stages, recount);
  if (method == "dgc") return dgc_threshold(passes, delta, seed);
  if (method == "redsync") return redsync_threshold(passes, delta);
  if (method == "gaussianksgd") return gaussianksgd_threshold(passes, delta);
  throw Error("unknown threshold method '" + std::string(method) +
              "': use topk, sidco-e, sidco-p, sidco-gp, dgc, redsync or gaussianksgd");
}

StageController::StageController(double delta, int initial_stages) : stages_(initial_stages) {
  retarget(delta);
}

void StageController::retarget(double delta) {
  target_count(1, delta);  // validates delta
  delta_ = delta;
  max_stages_ = std::max(1, int(std::ceil(std::log2(1.0 / delta) - 1e-12)));
  stages_ = std::clamp(stages_, 1, max_stages_);
}

int StageController::record(double achieved_density) {
  sum_ += achieved_density / delta_;
  if (++count_ == 5) {
    const double estimate = sum_ / count_;
    if (estimate > 1.2) --stages_;
    else if (estimate < 0.8) ++stages_;
    stages_ = std::clamp(stages_, 1, max_stages_);
    sum_ = 0.0;
    count_ = 0;
  }
  return stages_;
}

}  // namespace gs
