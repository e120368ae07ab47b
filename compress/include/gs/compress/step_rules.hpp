#pragma once
// The rules of a compressed training step that every front end shares, each written once:
// `gradscope train` (train/distributed/) and the PyTorch DDP hook (BucketCompressor, gradscope.ddp) both
// read them.
// - WarmupSchedule: dense or exponential warm-up over the first steps.
// - DensitySchedule, RegimeDetector: Accordion's adaptive density after the warm-up.
// - SkipRule: a non-finite gradient on any worker skips the step everywhere; ten skipped steps in
//   a row are an error.
// - RunStatistics: the summary over a run's steps (quality percentiles, bytes, times).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/state_stream.hpp"
#include "gs/compress/step_stats.hpp"

namespace gs::compress {

// Warm-up over the first `steps` steps. dense: those steps exchange the gradient uncompressed.
// exponential (DGC's): they compress at a density falling geometrically from start_density at
// step 0 towards `density`, reached at step `steps`.
struct WarmupSchedule {
  enum class Kind { dense, exponential };
  std::int64_t steps = 0;
  Kind kind = Kind::dense;
  double start_density = 0.25;
  double density = 1.0;  // the run's density, after the warm-up

  // The schedule of a front end's settings (kind by name), as gradscope train and the hook make it.
  static WarmupSchedule of(std::int64_t steps, std::string_view kind, double start_density, double density);
  static Kind parse_kind(std::string_view name);  // "dense" | "exponential"; gs::Error otherwise
  static std::string_view to_string(Kind k);

  bool warmup_at(std::int64_t step) const { return step < steps; }
  bool exponential() const { return steps > 0 && kind == Kind::exponential; }
  // Whether step `step` sends the gradient uncompressed (a dense warm-up step).
  bool uncompressed_at(std::int64_t step) const { return warmup_at(step) && !exponential(); }
  // The density step `step` runs at: 1 for a dense warm-up step, `density` after the warm-up.
  double density_at(std::int64_t step) const;

  // The names a front end gives the settings, for its messages (the CLI's flags, Python's
  // keywords): so the rule is checked once and the message speaks the caller's words.
  struct Names {
    std::string_view steps, kind, start_density, density;
  };
  // gs::Error for steps < 0, or an exponential warm-up whose start density is not above the
  // density and at most 1, or whose compressor has no density (density_based false); and for a
  // setting that would do nothing: an exponential warm-up of 0 steps, a start density other than
  // the default without the exponential warm-up.
  void check(bool density_based, std::string_view compressor, const Names& names) const;
};

// Whether step `step` sends the gradient uncompressed: a dense warm-up step, or a step at which a
// density-based compressor runs at density 1 (a sparse selection of every element would cost
// more than the dense gradient).
inline bool sends_dense(const WarmupSchedule& w, std::int64_t step, double density, bool density_based) {
  return w.uncompressed_at(step) || (density_based && density >= 1.0);
}

// The density after the warm-up. constant: the run's density at every step. accordion (Agarwal
// et al., MLSys 2021): every `interval` steps the workers compare the gradient's norm with the
// norm at the check before; a relative change of at least `eta` marks a critical regime, which
// compresses lightly (density `high`) until the next check, else the run's density. The warm-up,
// when there is one, keeps its own densities: the schedule takes over after it.
struct DensitySchedule {
  enum class Kind { constant, accordion };
  Kind kind = Kind::constant;
  double high = 0.1;           // the density of a critical regime
  std::int64_t interval = 20;  // steps between checks
  double eta = 0.5;            // the relative change of the norm that marks a critical regime

  static Kind parse_kind(std::string_view name);  // "constant" | "accordion"; gs::Error otherwise
  static std::string_view to_string(Kind k);
  bool adaptive() const { return kind == Kind::accordion; }

  // The names a front end gives the settings, for its messages.
  struct Names {
    std::string_view kind, high, interval, eta, density;
  };
  // gs::Error for an accordion schedule whose compressor has no density, whose high density is
  // not above `density` (the run's) and at most 1, whose interval is below 1 or eta not positive;
  // and for accordion's settings away from their defaults with the constant schedule (they would
  // do nothing).
  void check(bool density_based, std::string_view compressor, double density, const Names& names) const;
};

// Accordion's detector of critical regimes. The norm it compares is the root mean square, over
// the interval's counted (not skipped) steps and the workers, of each worker's gradient norm:
// sqrt(sum of ||g||^2 / counted steps). Every worker feeds it the same sums (all-reduced), so
// every worker takes the same decision. A run starts critical; the first check has nothing to
// compare with and keeps it; a previous norm of 0 counts as a critical change (Accordion's code).
class RegimeDetector {
 public:
  explicit RegimeDetector(DensitySchedule schedule = {}) : schedule_(schedule) {}
  const DensitySchedule& schedule() const { return schedule_; }
  bool on() const { return schedule_.adaptive(); }

  // Whether the compressor's density must be set step by step (an exponential warm-up or an
  // adaptive schedule), and to what: the warm-up's density over its steps, then the schedule's.
  bool moves_density(const WarmupSchedule& w) const { return w.exponential() || on(); }
  double density_at(const WarmupSchedule& w, std::int64_t step) const;
  // Whether step `step` runs at the high density of a critical regime.
  bool critical_at(const WarmupSchedule& w, std::int64_t step) const;

  // Step `step` finished: a counted step adds its squared gradient norm (this worker's, or summed
  // over the workers: the same kind at every step); a skipped step adds nothing.
  void add(bool skipped, double squared_norm);
  double interval_sum() const { return sum_; }
  // Whether step `step` closes an interval: then decide() follows, with interval_sum() summed
  // over the workers (the caller's all-reduce; interval_sum() itself when add() had the sums).
  bool due(std::int64_t step) const { return on() && (step + 1) % schedule_.interval == 0; }
  // Takes the decision for the next interval and starts a new one. An interval without counted
  // steps, or whose norm is not finite, keeps the regime and the norm compared with.
  void decide(double sum_over_workers);
  bool critical() const { return critical_; }
  double last_norm() const { return previous_; }  // the last check's norm (< 0: none yet)

  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);  // gs::Error (through r) when the schedule differs

 private:
  DensitySchedule schedule_;
  double sum_ = 0.0;
  std::int64_t counted_ = 0;
  double previous_ = -1.0;
  bool critical_ = true;
};

// Ten skipped steps in a row end a run: a gradient that stays NaN or Inf will not recover.
inline constexpr int kMaxSkippedInARow = 10;

class SkipRule {
 public:
  // Counts one finished step (skipped: some worker's gradient was NaN or Inf, so no worker used
  // it). gs::Error, after counting, when this makes kMaxSkippedInARow skipped steps in a row;
  // `advice` ends the message ("lower --lr or check the data").
  void record(bool skipped, std::int64_t step, std::string_view advice);
  std::int64_t skipped() const { return skipped_; }
  int in_a_row() const { return in_a_row_; }
  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  std::int64_t skipped_ = 0;
  int in_a_row_ = 0;
};

// when="auto" (--compress-when auto): compression only when it pays. Every step's exchange is
// timed (compress, collectives, decoding: summed over its buckets) in the mode it ran; the gate
// chooses the faster mode and, from time to time, runs one step in the other (a real step: dense
// sends the whole accumulator, so error feedback loses nothing) to look again. The first choice
// comes once both modes have a time: the dense warm-up's steps time dense, or the gate's own first
// steps (compressed, then dense). Those first times carry one-off costs, so a first choice between
// times within a factor 2 is looked at again at once: one more step of the chosen mode, then one of
// the other, and the second choice compares warm times. Otherwise the next look comes `interval`
// steps after a choice, times the ratio of the two times rounded up (at most 64 intervals): a mode
// far slower is seldom tried again. Every worker chooses alike: the times are taken as their
// maximum over the workers (the caller's all-reduce at the first bucket after a look, agree()).
class CompressionGate {
 public:
  enum class When { always, automatic };
  static When parse(std::string_view name);  // "always" | "auto"; gs::Error otherwise
  static std::string_view to_string(When w);

  explicit CompressionGate(When when = When::always, std::int64_t interval = 50);
  bool on() const { return when_ == When::automatic; }
  std::int64_t interval() const { return interval_; }

  // Whether step `step` (after the warm-up) sends dense: the choice, or a look at the other mode.
  bool dense_at(std::int64_t step) const;
  // A finished, not skipped step: its exchange took `seconds` in the mode it ran (dense or not).
  void add(std::int64_t step, bool dense, double seconds);
  // Whether a choice is due before the next step: the caller all-reduces times() with MAX over the
  // workers and passes the result to choose().
  bool choice_due() const { return on() && due_; }
  std::vector<float> times() const { return {float(dense_s_), float(compressed_s_)}; }
  void choose(std::int64_t next_step, std::span<const float> max_times);
  bool chose_dense() const { return dense_; }

  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  When when_;
  std::int64_t interval_;
  bool dense_ = false;     // the choice
  double dense_s_ = -1.0;  // the last time of each mode (< 0: none yet)
  double compressed_s_ = -1.0;
  std::int64_t look_at_ = -1;  // the step that runs the other mode (< 0: none planned)
  bool due_ = false;
  static constexpr int kMaxIntervals = 64;
};

// The achieved density watched against the target over a run's compressed steps: a warning,
// once, when over the last kWindow compressed steps the mean quality (achieved / target density)
// leaves [kLow, kHigh], or when at least half of those steps lie outside it (a density that swings
// between too little and too much). The bytes sent are then not what the density asks for. Not
// checkpointed: a resumed run watches from its first step on.
class DensityWatch {
 public:
  static constexpr int kWindow = 50;
  static constexpr double kLow = 0.5, kHigh = 2.0;
  // One compressed step's quality. Returns the warning (without who gives it) the first time the
  // window shows a drift, else an empty string.
  std::string add(double quality);

 private:
  std::vector<double> window_;  // the last kWindow qualities, oldest first
  bool warned_ = false;
};

// Means over the non-skipped steps; quality and density_mean over the compressed steps (the
// non-skipped steps after the warm-up that compress-when auto did not send dense: 0 when there are
// none), density_mean_all over every non-skipped step, the warm-up's and the dense ones included.
struct RunSummary {
  std::int64_t steps = 0, skipped_steps = 0;
  std::int64_t critical_steps = 0;  // non-skipped steps in a critical regime (DensitySchedule)
  double quality_mean = 0.0, quality_p5 = 0.0, quality_p95 = 0.0;
  double density_mean = 0.0, density_mean_all = 0.0;
  double bytes_per_step = 0.0, dense_bytes_per_step = 0.0, gathered_bytes_per_step = 0.0;
  double link_bytes_per_step = 0.0;  // StepStats::link_bytes (0 over steps from states before it)
  double host_device_bytes_per_step = 0.0, host_device_gathered_bytes_per_step = 0.0;
  double host_syncs_per_step = 0.0, overflow_per_step = 0.0;
  double compress_ms_per_step = 0.0, comm_ms_per_step = 0.0, hook_ms_per_step = 0.0, step_ms = 0.0;
  // SIDCo's own estimate over the compressed steps: the share of the steps that had one whose
  // estimate_quality lies within [kEstimateLow, kEstimateHigh] (0 without any); and the shares of
  // their groups (buckets) whose count correction ran, and that ended on an exact top-k.
  static constexpr double kEstimateLow = 0.8, kEstimateHigh = 1.25;
  double estimate_in_band = 0.0, corrected_share = 0.0, exact_share = 0.0;
};

// Running sums over every step of a run and the quality of each (8 bytes a step, for the
// percentiles), so a caller may keep only its last steps' records and still summarise the run.
class RunStatistics {
 public:
  // One finished step; step_seconds: its whole wall time, where the caller measures one (gradscope
  // train does; the hook cannot see the step around it).
  void add(const StepStats& s, double step_seconds = 0.0);
  RunSummary summary() const;
  void save_state(StateWriter& w) const;
  // with_waits: the state holds the waits' and overflow's sums (states before them do not);
  // with_estimates: SIDCo's estimate's, the corrections' and exact top-k's counts; with_links (and
  // with_estimates: they came later): the link bytes' sum.
  void load_state(StateReader& r, bool with_waits = true, bool with_estimates = true, bool with_links = true);

 private:
  std::int64_t steps_ = 0, skipped_ = 0, counted_ = 0, critical_ = 0;
  double density_ = 0, density_compressed_ = 0;  // sums over the counted steps, the compressed ones
  double bytes_ = 0, dense_ = 0, gathered_ = 0, bus_ = 0, bus_gathered_ = 0, syncs_ = 0, overflow_ = 0;
  double compress_ = 0, comm_ = 0, hook_ = 0, step_ = 0;
  double link_ = 0;
  // Over the compressed steps: steps with an estimate, those of them in band, groups, corrected
  // groups, groups ended on exact top-k.
  std::int64_t estimated_ = 0, in_band_ = 0, groups_ = 0, corrected_ = 0, exact_ = 0;
  std::vector<double> quality_;
};

}  // namespace gs::compress
