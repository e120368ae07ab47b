#pragma once
// Thresholds for a target density density (fraction of elements kept): single-stage SID thresholds,
// SIDCo multi-stage refinement (peaks over threshold), its adaptive stage controller, and the
// baselines' rules (algorithms.md sections 1, 2, 4). Data are read only through MagnitudePasses.
//
// Conventions: n = passes.size() counts every element (zeros and non-finite included);
// k = max(1, floor(n*density)); an element is selected when its x = |g| is finite and at or above
// the threshold (x >= threshold; a threshold of 0 selects the non-zero x): selection_bound().
// density outside (0, 1), n = 0, or k larger than the number of finite values throw gs::Error.
// Random-k has no threshold and is not here.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/radix_select.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/fitting/distributions.hpp"
#include "gs/fitting/formulas.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/sidco_plan.hpp"

namespace gs::fitting {

// The density every part of the project speaks of: the fraction of elements kept, in (0, 1].
// gs::Error naming the value otherwise, as `what` (the caller's word: "--ratio", "ratio").
void check_density(double density, std::string_view what = "density");
// The number of elements a density keeps: k = max(1, floor(n * density)), at most n; 0 for n = 0.
// gs::Error for a density outside (0, 1].
std::uint64_t target_count(std::uint64_t n, double density);
// What every threshold method checks first: a density strictly inside (0, 1) (a threshold that
// keeps everything is no threshold) and n >= 1; returns target_count(n, density).
std::uint64_t threshold_target(std::uint64_t n, double density);

// Single-stage threshold of a SID: eta with P(X > eta) = density, through complements.
double sid_threshold(const Exponential& d, double density);
double sid_threshold(const Gamma& d, double density);
double sid_threshold(const GeneralizedPareto& d, double density);
double sid_threshold(const Sid& d, double density);
// The cheap gamma approximation eta ~ -beta*(ln(density) + lgamma(alpha)) used by one reference
// variant; kept as a named alternative (accurate only near alpha = 1).
double gamma_threshold_approx(const Gamma& d, double density);
// GaussianKSGD's rule on x: eta = mu + Phi^-1(1 - density/2)*sd (a two-sided normal quantile).
double gaussian_threshold(const Normal& signed_g, double density);

struct ThresholdResult {
  std::string method;    // its row's name in threshold_methods() (gs/fitting/threshold_methods.hpp)
  double density = 0.0;  // target density density
  double threshold = 0.0;
  int stages = 0;              // SIDCo: stages run; dgc: 1, or 2 with the hierarchical step;
                               // redsync: bisection steps; gaussianksgd: 1 + corrections; topk: 1;
                               // sidco-topk: bounds tried (1, plus one per fallback read)
  std::uint64_t selected = 0;  // elements the rule keeps
  double quality = 0.0;        // achieved density / target = (selected/n)/density
  // The rule keeps exactly the k largest, ties at the threshold to the lower indices (topk,
  // sidco-topk, DGC's hierarchical step), not every x above the threshold.
  bool exact = false;
  // SIDCo: the count correction moved the stages' threshold (SidcoRule::correct).
  bool corrected = false;
};

// How SIDCo places its threshold beyond the stage rule of the paper's code.
struct SidcoRule {
  // Each tail stage aims at the count the plan expects (d1 * n * di^i elements) divided by the
  // exceedances actually left, so that an error of one stage is not carried into the next; off,
  // the reference's rule: di of whatever the last stage left.
  bool recount = false;
  // The count correction (SidcoStages::corrected, docs/algorithms.md): a selection outside
  // [1/band, band] times the target count moves the threshold once, at the cost of at most one
  // more read. A selector, which holds the selection in memory, keeps the target count's largest
  // (exactly top-k) where that move leaves the band. Off, with recount off: SIDCo as published.
  bool correct = true;
  double band = 1.25;
  // The stages' final threshold times this (SidcoPlan::scale): the calibration a compressor
  // carries from its last count of the same tensor (docs/algorithms.md). 1: the fit alone.
  double scale = 1.0;
  static constexpr SidcoRule published() { return {false, false, 1.25, 1.0}; }
};

// What a selection at `threshold` held: its count and the mean of x - threshold over it (the
// selection's own values give both; so does one statistics pass above the threshold).
struct SelectionCount {
  double threshold = 0.0;
  std::uint64_t count = 0;
  double excess_mean = 0.0;
};

// Which elements a threshold selects, the one rule every method's count and every compressor's
// selection follow: the finite x at or above it (x >= threshold), as top-k keeps its threshold,
// the k-th largest value, and DGC's reference code keeps its sample's value (torch.ge). A
// threshold of 0 selects the non-zero x: no method sends a zero it could leave out. The backends
// select x > bound; selection_bound(threshold) is the bound that keeps the same elements (the
// largest double below a positive threshold: no float lies between the two).
using formula::selection_bound;
// The count of what `threshold` selects (one pass): count_above(selection_bound(threshold)).
std::uint64_t count_selected(MagnitudePasses& passes, double threshold);

// The result of a rule that settled on threshold eta after `stages` steps: it counts what the
// threshold selects (one pass, count_selected) for selected and quality.
ThresholdResult counted_threshold(std::string method, MagnitudePasses& passes, double density, double eta, int stages);
// Density 1, where no rule runs: every finite element is kept, zeros included, as every
// compressor keeps it at density 1 (threshold 0, stages 0, one counting pass).
ThresholdResult keep_everything(std::string method, MagnitudePasses& passes);

// The name of the threshold method that runs SIDCo's variant v (its row in threshold_methods()).
std::string_view method_name(SidcoVariant v);

// SIDCo with M stages (algorithms.md section 2): stage 1 fits the variant's first law to all
// non-zero x at density d1 = 0.25 (density itself when M == 1 or density >= 0.25); each later stage
// fits the exceedances x > eta, shifted by their minimum t, at di = (density/0.25)^(1/(M-1)) and
// sets eta = t + tail threshold. Stops early when fewer than 2 distinct exceedances remain.
// Zeros are excluded from the fit, so stage 1 aims at d1*n/count among the non-zero values (the
// same d1*n elements the reference targets over all n); when count <= d1*n, stage 1 keeps every
// non-zero value (eta = 0) and the tail stages aim from count to density*n at
// di = (density*n/count)^(1/(M-1)). Then the count of the selection (one pass) and, with
// rule.correct, the count correction (one more pass when it moves the threshold).
ThresholdResult sidco_threshold(MagnitudePasses& passes, double density, SidcoVariant variant, int stages,
                                SidcoRule rule = {});

// The stages' threshold alone, without the count of the selection nor the correction (selected =
// 0, quality = 0): M passes, for callers that compact right after and get the count from there.
// Stage 1 and the tail stages use the light statistics passes (no ln x; squares only for the
// Pareto tails; ln x only for SIDCo-GP's gamma stage 1).
ThresholdResult sidco_estimate(MagnitudePasses& passes, double density, SidcoVariant variant, int stages,
                               bool recount = false);

// SIDCo's stage logic without any pass over the data, for backends that organise the passes
// themselves (e.g. compacting the exceedances once and running later stages on them). Feed it
// the statistics sidco_threshold would read:
//   SidcoStages plan(n, density, variant, stages, recount);
//   bool more = plan.first(stats_light(plan.first_fields()));   // all x
//   while (more) more = plan.tail(stats_above_light(plan.threshold(), plan.threshold(),
//                                                   plan.tail_fields()));
// then select x > plan.threshold(). Throws what sidco_threshold throws.
// The statistics SIDCo's stage 1 reads of all x for a variant (SidcoStages::first_fields): what a
// pass that writes the vector may take on the way, so that stage 1 need not read it again.
StatsFields sidco_first_fields(SidcoVariant variant);

class SidcoStages {
 public:
  SidcoStages(std::uint64_t n, double density, SidcoVariant variant, int stages, bool recount);
  // The final threshold's factor (SidcoRule::scale), before first(): gs::Error unless positive
  // and finite.
  void set_scale(double scale);
  StatsFields first_fields() const;
  StatsFields tail_fields() const;
  // Stage 1 from statistics of all x; true when a tail stage follows.
  bool first(const MagnitudeStats& s);
  // One tail stage from statistics of y = x - threshold() over x > threshold(); true when
  // another follows.
  bool tail(const MagnitudeStats& y);
  double threshold() const { return p_.eta; }
  int stages_run() const { return p_.run; }
  double density() const { return p_.density; }
  // True when stage 1's threshold is the final one (one stage asked for, or density at or above
  // the first stage's density), degenerate data aside; backends use it to plan.
  bool single_stage() const { return sidco_single_stage(p_); }
  // Density each tail stage aims at (after first() returned true); backends use it to plan.
  double tail_density() const { return p_.di; }
  std::string_view name() const { return method_name(p_.variant); }
  // The plan as data (gs/fitting/sidco_plan.hpp): what the device steps start from.
  const SidcoPlan& plan() const { return p_; }

  // The count k the density asks for: target_count(n, density).
  std::uint64_t target() const;
  // SIDCo's count correction (docs/algorithms.md). The selection at s.threshold (threshold())
  // holds s.count values: when that lies outside [1/band, band] times target(), the threshold
  // that places the target, once; else s.threshold. Above the
  // target: one more peaks-over-threshold stage, on the selection itself (an exponential fitted
  // to its excess over s.threshold, at density target/count: no read of the data). Below it: a
  // secant step on ln(count) against the threshold, through the last threshold before
  // threshold() and the count above it (0 and the non-zero count after a single stage).
  bool needs_correction(std::uint64_t count, double band) const;
  double corrected(const SelectionCount& s, double band) const;

 private:
  SidcoPlan p_;  // the steps are sidco_plan.hpp's, shared with the device
};

// sidco-topk: exact top-k at SIDCo's cost. SIDCo's fit on a spread sample of x gives a bound that
// the k largest very likely exceed; a backend packs every x above it in one read of g and takes
// exactly the k largest among those candidates (the same set as top-k, ties included). When the
// bound was too high (fewer candidates than k), it reads g again with a lower one. SidcoTopkBound
// is that plan without any data access (as SidcoStages is SIDCo's); the backends drive the reads:
//   SidcoTopkBound plan(n, density, stages);
//   double b = plan.first(spread_sample(SidcoTopkBound::sample_lines(n), SidcoTopkBound::kLineLength));
//   for (;;) { c = count of finite x > b (b < 0: every finite x); if (plan.holds(c, finite)) break;
//              b = plan.lower(); }
//   then the min(k, finite) largest among the x > b.
// The bound: with m finite sample values, the sample needs c = m*density + kMarginSd*sd values
// above it, sd the standard deviation of that count (binomial, or larger when the sample's runs of
// neighbours vary more than independent values would), so that g very likely holds k above it:
// b = min(just below the c-th largest sample value, SIDCo-E's threshold fitted to the sample at
// density c/m). docs/algorithms.md derives the margin and the expected reads.
class SidcoTopkBound {
 public:
  static constexpr std::uint64_t kLines = 2048, kLineLength = 16;  // the sample: 32768 values
  // The runs of the sample of an n-element vector: kLines, or fewer for short vectors (at most a
  // sixteenth of the vector, at least 64 runs), so the sample stays cheap beside one read of g.
  static constexpr std::uint64_t sample_lines(std::uint64_t n) {
    const std::uint64_t sixteenth = n / (16 * kLineLength);
    return sixteenth < 64 ? 64 : (sixteenth > kLines ? kLines : sixteenth);
  }
  static constexpr double kMarginSd = formula::kSidcoTopkMarginSd;
  // gs::Error for a density outside (0, 1] or stages < 1.
  SidcoTopkBound(std::uint64_t n, double density, int stages) { reset(n, density, stages); }
  // Plans another vector, keeping the buffers (a caller that selects often reuses one plan).
  void reset(std::uint64_t n, double density, int stages);
  std::uint64_t k() const { return k_; }
  // The first bound from the sample (x as read; non-finite values are skipped); -1 (every finite
  // x a candidate) when the sample cannot place one (too few values, or the margin covers all).
  double first(std::span<const float> sample);
  // Whether `candidates` finite x above bound() hold the min(k, finite) largest.
  bool holds(std::uint64_t candidates, std::uint64_t finite) const { return candidates >= std::min(k_, finite); }
  // The next, lower bound after a shortfall: the sample's value at 4x the count, then -1.
  double lower();
  double bound() const { return bound_; }
  int reads() const { return reads_; }  // bounds tried so far (1 + fallbacks)
  int stages_run() const { return stages_run_; }

 private:
  std::uint64_t n_ = 0, k_ = 0;
  double density_ = 1.0;
  int stages_ = 1;
  std::vector<float> finite_;  // the sample's finite x, for lower()
  std::vector<float> top_;     // scratch of the partial sorts
  RadixSelector selector_;     // the histogram of finite_
  std::uint64_t needed_ = 0;   // sample values above the first bound
  double bound_ = -1.0;
  int reads_ = 0;
  int stages_run_ = 0;
};

// The fitting report's sidco-topk: the plan above over the passes. Its threshold, selected count
// and quality are exact top-k's; stages counts the bounds it tried (1, plus one per fallback read).
// gs::Error as topk_threshold.
ThresholdResult sidco_topk_threshold(MagnitudePasses& passes, double density, int stages);

// Exact top-k: threshold = k-th largest x. The rule keeps exactly k elements: all x > threshold
// plus, among ties equal to the threshold, the lowest indices; selected = k, quality = k/(n density).
ThresholdResult topk_threshold(MagnitudePasses& passes, double density);
// DGC: random sample of ceil(0.01 n) values, threshold = k'-th largest with k' = ceil(m*density);
// when more than 4k/3 are selected the hierarchical step runs exact top-k on the selection (its
// threshold becomes the k-th largest, selected = k).
ThresholdResult dgc_threshold(MagnitudePasses& passes, double density, std::uint64_t seed);
// RedSync's bisection between mean(x) and max(x) (mean over all finite x, zeros included).
ThresholdResult redsync_threshold(MagnitudePasses& passes, double density);
// GaussianKSGD: normal of the signed g, threshold on x, up to 3 corrections (x0.5 / x1.5).
ThresholdResult gaussianksgd_threshold(MagnitudePasses& passes, double density);

// The rule of the method named (a row of threshold_methods()); stages is used by SIDCo and
// sidco-topk only (0: default_sidco_stages(density)), seed by DGC only, sidco by SIDCo only.
// At density 1, keep_everything(). The result's stages is 0 for a method whose row counts no
// stages (ThresholdMethodInfo::stages: top-k, DGC). gs::Error for an unknown name, listing the
// known ones.
ThresholdResult threshold_by_name(std::string_view method, MagnitudePasses& passes, double density, int stages,
                                  std::uint64_t seed, SidcoRule sidco = {});

// SIDCo's stage count at `density` when the caller gives none (fit, analyze, the one-shot calls)
// and where the adaptive controller starts: round(log10(1/density)), at least 1 (1 at 0.1, 2 at
// 0.01, 3 at 0.001). On the gradients of ResNet-18, a Transformer encoder and an LSTM
// (scripts/one_shot_stages.py, three seeds) every SIDCo variant then sends 0.61 to 1.5 times the
// target, where 3 stages at every density sent 0.34 times it on the LSTM at 0.01 (docs/python.md).
int default_sidco_stages(double density);

// The adaptive stage controller of the SIDCo compressor (shared by all tensors of a model):
// accumulates achieved/target density every step; every 5 steps moves M down when the estimate
// overshoots (> 1.2) and up when it undershoots (< 0.8), clamped to [1, ceil(log2(1/density))].
class StageController {
 public:
  // Starts at initial_stages (0: default_sidco_stages(density)), clamped to what the density
  // allows (1 to ceil(log2(1/density))).
  explicit StageController(double density, int initial_stages = 0);
  int stages() const { return stages_; }
  int max_stages() const { return max_stages_; }
  // Records one step's achieved density nnz/n; returns the stage count for the next step.
  int record(double achieved_density);
  // Aims at a new target density from the next record() on: the window's steps so far keep the
  // quality they had against their own target; the stage count is clamped to the new maximum.
  void retarget(double density);
  // Its whole state (target, stage count, the window so far), for checkpoints.
  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  double density_;
  int max_stages_;
  int stages_;
  double sum_ = 0.0;
  int count_ = 0;
};

}  // namespace gs::fitting
