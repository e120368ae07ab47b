// Thresholds: SID quantiles at density density, SIDCo's multi-stage peaks-over-threshold refinement
// and the baselines' rules (algorithms.md sections 1, 2, 4).
#include "gs/fitting/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "gs/base/radix_select.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/estimators.hpp"
#include "gs/fitting/formulas.hpp"

namespace gs::fitting {

std::uint64_t count_selected(MagnitudePasses& passes, double threshold) {
  return passes.count_above(selection_bound(threshold));
}

ThresholdResult counted_threshold(std::string method, MagnitudePasses& passes, double density, double eta, int stages) {
  ThresholdResult r;
  r.method = std::move(method);
  r.density = density;
  r.threshold = eta;
  r.stages = stages;
  r.selected = count_selected(passes, eta);
  r.quality = double(r.selected) / double(passes.size()) / density;
  return r;
}

ThresholdResult keep_everything(std::string method, MagnitudePasses& passes) {
  ThresholdResult r;
  r.method = std::move(method);
  r.density = 1.0;
  r.selected = passes.count_above(-1.0);  // every finite x
  r.quality = passes.size() ? double(r.selected) / double(passes.size()) : 0.0;
  r.exact = true;
  return r;
}

void check_density(double density, std::string_view what) {
  if (!(density > 0.0 && density <= 1.0)) {
    std::ostringstream os;
    os << what << " " << density << " is outside (0, 1]: give the fraction of elements to keep, e.g. 0.01";
    throw Error(os.str());
  }
}

std::uint64_t target_count(std::uint64_t n, double density) {
  check_density(density);
  if (n == 0) return 0;
  return target_count_of(n, density);
}

std::uint64_t threshold_target(std::uint64_t n, double density) {
  if (!(density > 0.0 && density < 1.0)) {
    std::ostringstream os;
    os << "density (ratio) must lie strictly between 0 and 1, got " << density;
    throw Error(os.str());
  }
  if (n == 0) throw Error("no elements: a threshold needs a non-empty vector");
  return target_count(n, density);
}

double sid_threshold(const Exponential& d, double density) {
  threshold_target(1, density);
  return quantile(complement(d, density));
}
double sid_threshold(const Gamma& d, double density) {
  threshold_target(1, density);
  return quantile(complement(d, density));
}
double sid_threshold(const GeneralizedPareto& d, double density) {
  threshold_target(1, density);
  return quantile(complement(d, density));
}
double sid_threshold(const Sid& d, double density) {
  threshold_target(1, density);
  return quantile_c(d, density);
}
double gamma_threshold_approx(const Gamma& d, double density) {
  threshold_target(1, density);
  return -d.beta() * (std::log(density) + std::lgamma(d.alpha()));
}
double gaussian_threshold(const Normal& g, double density) {
  threshold_target(1, density);
  return g.mu() + formula::std_normal_quantile_c(0.5 * density) * g.sigma();
}

SidcoStages::SidcoStages(std::uint64_t n, double density, SidcoVariant variant, int stages, bool recount)
    : p_(sidco_plan(n, density, variant, stages, recount)) {
  threshold_target(n, density);
  if (stages < 1) throw Error("SIDCo: the number of stages must be at least 1");
}

void SidcoStages::set_scale(double scale) {
  if (!(scale > 0.0 && std::isfinite(scale)))
    throw Error("SIDCo: the threshold's scale must be positive and finite, not " + std::to_string(scale));
  p_.scale = scale;
}

StatsFields sidco_first_fields(SidcoVariant variant) {
  StatsFields f;
  f.sum_sq = variant == SidcoVariant::pareto;
  f.sum_log = variant == SidcoVariant::gamma_pareto;
  return f;
}

StatsFields SidcoStages::first_fields() const { return sidco_first_fields(p_.variant); }

StatsFields SidcoStages::tail_fields() const {
  StatsFields f;
  f.sum_sq = p_.variant != SidcoVariant::exponential;
  return f;
}

bool SidcoStages::first(const MagnitudeStats& s) {
  const bool more = sidco_first(p_, s);
  if (p_.failure == SidcoFitFailure::none) return more;
  // The fit's own error, which says what was wrong with the values.
  switch (p_.failure) {
    case SidcoFitFailure::exponential:
      (void)fit_exponential(s);
      break;
    case SidcoFitFailure::gpareto_moments:
      (void)fit_gpareto_moments(s);
      break;
    case SidcoFitFailure::gamma_closed_form:
      (void)fit_gamma_closed_form(s);
      break;
    case SidcoFitFailure::none:
      break;
  }
  throw Error(std::string(name()) + ": stage 1's fit has no valid parameters on these values (mean " +
              std::to_string(s.mean()) + ", " + std::to_string(s.count) + " non-zero values)");
}

bool SidcoStages::tail(const MagnitudeStats& y) {
  GS_ASSERT(p_.tails_left > 0);
  return sidco_tail(p_, y);
}

std::uint64_t SidcoStages::target() const { return target_count(p_.n, p_.density); }

bool SidcoStages::needs_correction(std::uint64_t count, double band) const {
  return sidco_needs_correction(p_, count, band);
}

double SidcoStages::corrected(const SelectionCount& s, double band) const {
  if (!needs_correction(s.count, band)) return s.threshold;
  const double k = double(target());
  if (double(s.count) > k) return sidco_corrected_above(p_, s.threshold, s.count, s.excess_mean, band);
  return sidco_corrected_below(p_, s.threshold, s.count, band);
}

namespace {

SidcoStages run_stages(MagnitudePasses& passes, double density, SidcoVariant variant, int stages, bool recount,
                       double scale = 1.0) {
  SidcoStages plan(passes.size(), density, variant, stages, recount);
  plan.set_scale(scale);
  bool more = plan.first(passes.stats_light(plan.first_fields()));
  while (more) more = plan.tail(passes.stats_above_light(plan.threshold(), plan.threshold(), plan.tail_fields()));
  return plan;
}

}  // namespace

ThresholdResult sidco_estimate(MagnitudePasses& passes, double density, SidcoVariant variant, int stages,
                               bool recount) {
  const SidcoStages plan = run_stages(passes, density, variant, stages, recount);
  ThresholdResult r;
  r.method = std::string(plan.name());
  r.density = density;
  r.threshold = plan.threshold();
  r.stages = plan.stages_run();
  return r;
}

ThresholdResult sidco_threshold(MagnitudePasses& passes, double density, SidcoVariant variant, int stages,
                                SidcoRule rule) {
  const SidcoStages plan = run_stages(passes, density, variant, stages, rule.recount, rule.scale);
  const std::string name(plan.name());
  const double eta = plan.threshold();
  if (!rule.correct) return counted_threshold(name, passes, density, eta, plan.stages_run());
  // The count and the selection's mean excess in one pass, then at most one more count.
  const MagnitudeStats above = passes.stats_above_light(eta, eta, StatsFields{});
  const SelectionCount first{eta, above.count + above.zeros, above.mean()};
  const double corrected = plan.corrected(first, rule.band);
  if (corrected == eta) {
    ThresholdResult r;
    r.method = name;
    r.density = density;
    r.threshold = eta;
    r.stages = plan.stages_run();
    r.selected = first.count;
    r.quality = double(r.selected) / double(passes.size()) / density;
    return r;
  }
  ThresholdResult r = counted_threshold(name, passes, density, corrected, plan.stages_run());
  r.corrected = true;
  return r;
}

namespace {

// What SIDCo-E's stages read (count, zeros, sum, min, max) of y = x - shift over the sample's
// x > threshold, in memory. No ln x or squares: the exponential fits need neither.
MagnitudeStats above(std::span<const float> xs, double threshold, double shift) {
  // In float, branch-free and vectorized (the reductions may be reordered): which values pass is
  // unpredictable, and a chain of dependent double additions would cost 4 cycles an element. A
  // bound's estimate needs no more than float sums over a sample.
  float t = float(threshold);
  if (double(t) > threshold) t = std::nextafter(t, -std::numeric_limits<float>::infinity());
  const float sh = float(shift);
  std::uint32_t count = 0, zeros = 0;
  float sum = 0.0f, lo = std::numeric_limits<float>::infinity(), hi = -lo;
  const float* x = xs.data();
  const std::size_t n = xs.size();
#pragma omp simd reduction(+ : count, zeros, sum) reduction(min : lo) reduction(max : hi)
  for (std::size_t i = 0; i < n; ++i) {
    const float y = x[i] - sh;
    const bool in = x[i] > t;
    const bool zero = in && y == 0.0f;
    const bool counted = in && y != 0.0f;
    zeros += zero ? 1u : 0u;
    count += counted ? 1u : 0u;
    sum += counted ? y : 0.0f;
    lo = std::min(lo, counted ? y : lo);
    hi = std::max(hi, counted ? y : hi);
  }
  MagnitudeStats s;
  s.sum_sq = s.sum_log = s.sum_signed = std::numeric_limits<double>::quiet_NaN();
  s.count = count;
  s.zeros = zeros;
  s.sum = sum;
  if (count) {
    s.min = lo;
    s.max = hi;
  }
  return s;
}

}  // namespace

void SidcoTopkBound::reset(std::uint64_t n, double density, int stages) {
  if (stages < 1) throw Error("sidco-topk: the number of SIDCo stages must be at least 1");
  k_ = target_count(n, density);
  n_ = n;
  density_ = density;
  stages_ = stages;
  bound_ = -1.0;
  reads_ = stages_run_ = 0;
}

double SidcoTopkBound::first(std::span<const float> sample) {
  // The finite |x| (a compaction), then their histogram for the radix picks below and SIDCo's
  // stage-1 statistics (count, zeros, sum, min, max: all SIDCo-E reads).
  finite_.resize(sample.size());
  std::size_t m_finite = 0;
  for (float v : sample) {  // branch-free: keep |v|, advance only past finite ones
    finite_[m_finite] = std::fabs(v);
    m_finite += std::isfinite(v) ? 1 : 0;
  }
  finite_.resize(m_finite);
  const MagnitudeStats all = above(finite_, -1.0, 0.0);
  selector_ = RadixSelector();
  selector_.count_all(finite_);
  reads_ = 1;
  stages_run_ = 0;
  bound_ = -1.0;
  const double m = double(finite_.size());
  const double expected = m * density_;
  needed_ = 0;
  if (k_ >= n_ || expected < 1.0 || expected >= m) return bound_;
  auto each = [&](auto&& f) {
    for (float x : finite_) f(x);
  };
  // How much the sample's count above the density's quantile q may stray (formula::sidco_topk_needed).
  const float q = selector_.pick(each, std::uint64_t(expected), top_).value;
  const std::size_t runs = (sample.size() + kLineLength - 1) / kLineLength;
  double sum_c = 0.0, sum_cc = 0.0;
  for (std::size_t r = 0; r < runs; ++r) {
    const std::size_t begin = r * kLineLength, end = std::min(sample.size(), begin + kLineLength);
    int c = 0;
#pragma omp simd reduction(+ : c)
    for (std::size_t i = begin; i < end; ++i) c += std::fabs(sample[i]) >= q && std::isfinite(sample[i]) ? 1 : 0;
    sum_c += c;
    sum_cc += double(c) * c;
  }
  needed_ = formula::sidco_topk_needed(expected, density_, runs, sum_c, sum_cc);
  if (needed_ >= finite_.size()) return bound_;
  // The sample caps the bound: never above its needed-th largest value (just below it, so the
  // values tied with it are kept too). SIDCo-E fitted to the sample at the margin's density
  // lowers it where the fit extrapolates the tail more cautiously.
  bound_ = double(std::nextafter(selector_.pick(each, needed_, top_).value, 0.0f));
  try {
    SidcoStages plan(finite_.size(), double(needed_) / m, SidcoVariant::exponential, stages_, false);
    bool more = plan.first(all);
    while (more) more = plan.tail(above(finite_, plan.threshold(), plan.threshold()));
    bound_ = std::min(bound_, plan.threshold());
    stages_run_ = plan.stages_run();
  } catch (const Error&) {
    // a sample SIDCo cannot fit (e.g. all values equal): the sample's value alone
  }
  if (!(bound_ > 0.0)) bound_ = -1.0;
  return bound_;
}

double SidcoTopkBound::lower() {
  // The second read packs above the sample's value at four times the count; the third packs
  // every finite x, which holds the k largest by definition.
  const std::uint64_t wider = 4 * needed_;
  auto each = [&](auto&& f) {
    for (float x : finite_) f(x);
  };
  bound_ = (++reads_ == 2 && bound_ >= 0.0 && wider < finite_.size())
               ? double(std::nextafter(selector_.pick(each, wider, top_).value, 0.0f))
               : -1.0;
  if (!(bound_ > 0.0)) bound_ = -1.0;
  return bound_;
}

ThresholdResult sidco_topk_threshold(MagnitudePasses& passes, double density, int stages) {
  const std::uint64_t n = passes.size();
  threshold_target(n, density);
  SidcoTopkBound plan(n, density, stages);
  double bound = plan.first(passes.spread_sample(SidcoTopkBound::sample_lines(n), SidcoTopkBound::kLineLength));
  const MagnitudeStats s = passes.stats_light({});
  const std::uint64_t finite = s.count + s.zeros;
  if (plan.k() > finite) {
    std::ostringstream os;
    os << "sidco-topk: k = " << plan.k() << " exceeds the " << finite << " finite values (" << s.nonfinite
       << " non-finite): lower the ratio";
    throw Error(os.str());
  }
  while (!plan.holds(passes.count_above(bound), finite)) bound = plan.lower();
  ThresholdResult r;
  r.method = "sidco-topk";
  r.density = density;
  r.threshold = passes.kth_largest(plan.k());
  r.stages = plan.reads();
  r.selected = plan.k();
  r.quality = double(plan.k()) / double(n) / density;
  r.exact = true;
  return r;
}

ThresholdResult topk_threshold(MagnitudePasses& passes, double density) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = threshold_target(n, density);
  const MagnitudeStats s = passes.stats_light({});  // the counts alone: no squares, no logs
  const std::uint64_t finite = s.count + s.zeros;
  if (k > finite) {
    std::ostringstream os;
    os << "top-k: k = " << k << " exceeds the " << finite << " finite values (" << s.nonfinite
       << " non-finite): lower the ratio";
    throw Error(os.str());
  }
  ThresholdResult r;
  r.method = "topk";
  r.density = density;
  r.threshold = passes.kth_largest(k);
  r.stages = 1;
  r.selected = k;
  r.quality = double(k) / double(n) / density;
  r.exact = true;
  return r;
}

ThresholdResult dgc_threshold(MagnitudePasses& passes, double density, std::uint64_t seed) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = threshold_target(n, density);
  const auto m = static_cast<std::uint64_t>(std::ceil(0.01 * double(n)));
  std::vector<float> sample = passes.random_sample(m, seed);
  std::erase_if(sample, [](float v) { return !std::isfinite(v); });
  if (sample.empty()) throw Error("DGC: the random sample holds no finite value");
  const std::uint64_t kk = formula::dgc_sample_rank(sample.size(), density);
  std::nth_element(sample.begin(), sample.begin() + (kk - 1), sample.end(), std::greater<>());
  ThresholdResult r = counted_threshold("dgc", passes, density, double(sample[kk - 1]), 1);
  if (formula::dgc_exact_step(r.selected, k)) {  // hierarchical step: exact top-k among the selection
    r.threshold = passes.kth_largest(k);
    r.selected = k;
    r.stages = 2;
    r.quality = double(k) / double(n) / density;
    r.exact = true;
  }
  return r;
}

ThresholdResult redsync_threshold(MagnitudePasses& passes, double density) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = threshold_target(n, density);
  const MagnitudeStats s = passes.stats();
  if (s.count == 0) return counted_threshold("redsync", passes, density, 0.0, 0);
  const double mean = s.sum / double(s.count + s.zeros);
  double l = 0.0, r = 1.0, eta = mean;
  int steps = 0;
  while (r - l > 0.2) {
    const double t = 0.5 * (l + r);
    eta = mean + t * (s.max - mean);
    const std::uint64_t nnz = count_selected(passes, eta);
    ++steps;
    if (nnz > k && nnz < 2 * k) break;
    if (2 * nnz < k)
      r = t;
    else
      l = t;
  }
  return counted_threshold("redsync", passes, density, eta, steps);
}

ThresholdResult gaussianksgd_threshold(MagnitudePasses& passes, double density) {
  const std::uint64_t n = passes.size();
  const std::uint64_t k = threshold_target(n, density);
  double eta = gaussian_threshold(fit_normal_signed(passes.stats()), density);
  int corrections = 0;
  for (; corrections < 3; ++corrections) {
    const std::uint64_t nnz = count_selected(passes, eta);
    if (3 * nnz < 2 * k)
      eta *= 0.5;
    else if (3 * nnz > 4 * k)
      eta *= 1.5;
    else
      break;
  }
  return counted_threshold("gaussianksgd", passes, density, eta, 1 + corrections);
}

int default_sidco_stages(double density) {
  if (!(density > 0.0 && density <= 1.0))
    throw Error("SIDCo: density must lie in (0, 1], got " + std::to_string(density));
  return std::max(1, int(std::lround(std::log10(1.0 / density))));
}

StageController::StageController(double density, int initial_stages)
    : stages_(initial_stages > 0 ? initial_stages : default_sidco_stages(density)) {
  retarget(density);
}

void StageController::retarget(double density) {
  threshold_target(1, density);  // validates density
  density_ = density;
  max_stages_ = std::max(1, int(std::ceil(std::log2(1.0 / density) - 1e-12)));
  stages_ = std::clamp(stages_, 1, max_stages_);
}

int StageController::record(double achieved_density) {
  sum_ += achieved_density / density_;
  if (++count_ == 5) {
    const double estimate = sum_ / count_;
    if (estimate > 1.2)
      --stages_;
    else if (estimate < 0.8)
      ++stages_;
    stages_ = std::clamp(stages_, 1, max_stages_);
    sum_ = 0.0;
    count_ = 0;
  }
  return stages_;
}

void StageController::save_state(StateWriter& w) const {
  w.put(density_);
  w.put<std::int32_t>(stages_);
  w.put(sum_);
  w.put<std::int32_t>(count_);
}

void StageController::load_state(StateReader& r) {
  const double density = r.get<double>();
  if (!(density > 0.0 && density < 1.0)) r.fail("the stage controller's target density is out of range");
  retarget(density);
  const int stages = r.get<std::int32_t>();
  const double sum = r.get<double>();
  const int count = r.get<std::int32_t>();
  if (stages < 1 || stages > max_stages_ || count < 0 || count >= 5 || !std::isfinite(sum))
    r.fail("the stage controller's state is out of range");
  stages_ = stages;
  sum_ = sum;
  count_ = count;
}

}  // namespace gs::fitting
