// TrainConfig and its option table: one row per `gradscope train` option, from which the CLI,
// validation, the workers' comparison line, their arguments and the JSON echo are generated.
#include "gs/distributed/config.hpp"

#include <algorithm>
#include <cmath>

#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/train/common_options.hpp"

namespace gs::distributed {
namespace {

// A row of the table: the field `access` reaches, with its check and choices (gs::option_row),
// who it concerns and whether --json echoes it.
template <class T, class Access>
TrainOption row(std::string flag, std::string help, OptionScope scope, Access access,
                std::function<void(const T&)> check = {}, std::vector<std::string> choices = {}, bool in_json = true) {
  TrainOption o;
  static_cast<OptionRow<TrainConfig>&>(o) =
      option_row<T, TrainConfig>(std::move(flag), std::move(help), access, std::move(check), std::move(choices));
  o.scope = scope;
  o.in_json = in_json;
  return o;
}

// An accessor of one field, for a const or a mutable config alike.
#define GS_FIELD(expr) \
  [](auto& c) -> auto& { return expr; }

// A row `gradscope capture` shares (gs/train/common_options.hpp).
TrainOption common(std::string_view flag, OptionScope scope) {
  TrainOption o;
  static_cast<OptionRow<TrainConfig>&>(o) = train::common_option<TrainConfig>(flag);
  o.scope = scope;
  return o;
}

template <class T>
std::function<void(const T&)> at_least(std::string flag, T low, std::string rule) {
  return [flag, low, rule](const T& v) {
    if (v < low) throw Error(flag + " must be " + rule);
  };
}

std::vector<std::string> compressor_choices() {
  std::vector<std::string> v;
  for (auto n : compress::compressor_names()) v.emplace_back(n);
  return v;
}

// The density schedule after the warm-up (gs::compress::DensitySchedule); its settings matter
// only for accordion.
void add_density_schedule_rows(std::vector<TrainOption>& t) {
  using S = OptionScope;
  t.push_back(row<std::string>("--density-schedule",
                               "constant: --ratio at every step after the warm-up; accordion: "
                               "--density-high in critical regimes, detected by the gradient norm's "
                               "change every --density-interval steps (Accordion), else --ratio",
                               S::shared, GS_FIELD(c.density_schedule), {}, {"constant", "accordion"}));
  const auto accordion = [](const TrainConfig& c) { return c.density_schedule == "accordion"; };
  t.push_back(row<double>("--density-high", "accordion: the density of a critical regime", S::shared,
                          GS_FIELD(c.density_high)));
  t.back().matters = accordion;
  t.push_back(row<std::int64_t>("--density-interval", "accordion: steps between checks of the gradient norm", S::shared,
                                GS_FIELD(c.density_interval)));
  t.back().matters = accordion;
  t.push_back(row<double>("--density-eta",
                          "accordion: a relative change of the gradient norm between checks of at "
                          "least this marks a critical regime",
                          S::shared, GS_FIELD(c.density_eta)));
  t.back().matters = accordion;
}

std::vector<TrainOption> make_table() {
  using S = OptionScope;
  std::vector<TrainOption> t;
  t.push_back(common("--model", S::shared));
  t.push_back(row<std::string>("--compressor", "compression method (docs/compressors.md)", S::shared,
                               GS_FIELD(c.compressor), {}, compressor_choices()));
  t.push_back(row<double>("--ratio", "target density: fraction of elements sent, in (0, 1]", S::shared,
                          GS_FIELD(c.density), [](const double& v) { fitting::check_density(v, "--ratio"); }));
  t.push_back(row<int>("--workers", "worker processes (world size)", S::shared, GS_FIELD(c.workers),
                       at_least<int>("--workers", 1, "at least 1")));
  t.push_back(row<std::int64_t>("--steps", "stop after this many steps (0: run the epochs)", S::shared,
                                GS_FIELD(c.steps), at_least<std::int64_t>("--steps", 0, ">= 0 (0: run the epochs)")));
  t.push_back(row<int>("--epochs", "passes over each worker's shard", S::shared, GS_FIELD(c.epochs),
                       at_least<int>("--epochs", 1, "at least 1")));
  t.push_back(row<std::string>("--granularity", "layer, model or bucket", S::shared, GS_FIELD(c.granularity), {},
                               {"layer", "model", "bucket"}));
  t.push_back(row<std::uint64_t>("--bucket-size", "elements per bucket (--granularity bucket)", S::shared,
                                 GS_FIELD(c.bucket_size), at_least<std::uint64_t>("--bucket-size", 1, "at least 1")));
  t.push_back(common("--batch", S::shared));
  t.push_back(common("--lr", S::shared));
  t.push_back(row<std::string>("--lr-schedule",
                               "constant; cosine: decays from --lr to 0 over the run's steps; step: "
                               "--lr / 10 over the last tenth of the steps",
                               S::shared, GS_FIELD(c.lr_schedule), {}, {"constant", "cosine", "step"}));
  t.push_back(common("--momentum", S::shared));
  t.push_back(row<bool>("--momentum-correction",
                        "keep the momentum per worker before sparsification, masked where sent (DGC)", S::shared,
                        GS_FIELD(c.momentum_correction)));
  t.push_back(row<std::int64_t>(
      "--warmup-steps", "warm up over the first N steps (see --warmup-schedule), then compress at --ratio", S::shared,
      GS_FIELD(c.warmup_steps), at_least<std::int64_t>("--warmup-steps", 0, ">= 0")));
  t.push_back(row<std::string>("--warmup-schedule",
                               "dense: exchange the warm-up steps uncompressed; exponential: compress "
                               "them at a density falling geometrically from --warmup-start-ratio to "
                               "--ratio (DGC)",
                               S::shared, GS_FIELD(c.warmup_schedule), {}, {"dense", "exponential"}));
  t.back().matters = [](const TrainConfig& c) { return c.warmup_steps > 0; };
  t.push_back(row<double>("--warmup-start-ratio", "exponential warm-up: the density of the first step", S::shared,
                          GS_FIELD(c.warmup_start_density)));
  t.back().matters = [](const TrainConfig& c) { return c.exponential_warmup(); };
  add_density_schedule_rows(t);
  t.push_back(row<std::string>("--compress-when",
                               "always: compress every step after the warm-up; auto: send dense while dense "
                               "is the faster exchange (both timed, the choice the same on every worker)",
                               S::shared, GS_FIELD(c.compress_when), {}, {"always", "auto"}));
  t.push_back(row<std::int64_t>("--compress-when-interval",
                                "auto: steps before another look at the mode not chosen (times the ratio of "
                                "the two modes' times, at most 64 times)",
                                S::shared, GS_FIELD(c.compress_when_interval),
                                at_least<std::int64_t>("--compress-when-interval", 1, "at least 1")));
  t.back().matters = [](const TrainConfig& c) { return c.compress_when == "auto"; };
  t.push_back(row<std::string>("--exchange",
                               "allgather: every worker's (index, value) pairs to every worker; shared: the "
                               "workers' values at one set of indices, a rotating leader's selection; "
                               "sparse-allreduce: each worker sums one region of the indices, the largest sums "
                               "all-gathered; auto: of allgather and sparse-allreduce, the one of fewer bytes per "
                               "worker at this number of workers and density",
                               S::shared, GS_FIELD(c.exchange), {},
                               {"allgather", "shared", "sparse-allreduce", "auto"}));
  t.push_back(common("--seed", S::shared));
  // The compressor's own options, from compress/'s table; the sampling seed is derived from --seed
  // per worker, and the kernels backend may differ between workers (one may have a GPU).
  for (const auto& r : compress::compressor_option_rows()) {
    if (r.flag == "--seed") continue;
    TrainOption o;
    static_cast<OptionRow<TrainConfig>&>(o) = nested_row<TrainConfig>(
        r, [](auto& c) -> auto& { return c.compression; });
    o.scope = r.flag == "--backend" ? S::worker : S::shared;
    t.push_back(std::move(o));
  }
  t.push_back(row<double>(
      "--timeout", "seconds a worker waits on its peers before failing", S::worker, GS_FIELD(c.timeout),
      [](const double& v) {
        if (!(v > 0.0)) throw Error("--timeout must be positive (seconds)");
      },
      {}, false));
  t.push_back(row<std::string>("--checkpoint", "write checkpoints into this directory (with --checkpoint-every)",
                               S::worker, GS_FIELD(c.checkpoint), {}, {}, false));
  t.push_back(row<std::int64_t>("--checkpoint-every", "steps between checkpoints (0: none)", S::shared,
                                GS_FIELD(c.checkpoint_every),
                                at_least<std::int64_t>("--checkpoint-every", 0, ">= 0 (0: none)")));
  t.back().matters = [](const TrainConfig& c) { return !c.checkpoint.empty(); };
  t.back().in_json = false;
  t.push_back(row<int>("--keep-checkpoints",
                       "complete checkpoints kept; older ones are deleted once a new one is written "
                       "and verified",
                       S::shared, GS_FIELD(c.keep_checkpoints), at_least<int>("--keep-checkpoints", 1, "at least 1"),
                       {}, false));
  t.back().matters = [](const TrainConfig& c) { return !c.checkpoint.empty(); };
  t.push_back(row<std::string>("--resume",
                               "continue from the latest complete checkpoint in this directory "
                               "(or from the checkpoint directory given)",
                               S::worker, GS_FIELD(c.resume), {}, {}, false));
  t.push_back(row<int>("--max-restarts",
                       "when a worker dies, restart every worker from the last checkpoint, at most "
                       "this many times",
                       S::launcher, GS_FIELD(c.max_restarts), at_least<int>("--max-restarts", 0, ">= 0"), {}, false));
  t.push_back(row<std::string>("--record", "record rank 0's raw gradients to this snapshot (.h5)", S::output,
                               GS_FIELD(c.record), {}, {}, false));
  t.push_back(row<bool>("--force", "overwrite the --record file; delete --checkpoint's old checkpoints", S::output,
                        GS_FIELD(c.force), {}, {}, false));
  t.push_back(row<bool>("--json", "print one JSON object at the end", S::output, GS_FIELD(c.json), {}, {}, false));
  t.push_back(row<bool>("--quiet", "no per-step lines", S::output, GS_FIELD(c.quiet), {}, {}, false));
  t.push_back(row<int>("--rank", "this worker's rank (manual placement; needs --master-port)", S::placement,
                       GS_FIELD(c.rank), {}, {}, false));
  t.push_back(row<std::string>("--master-addr", "address of rank 0's store", S::placement, GS_FIELD(c.master_addr), {},
                               {}, false));
  t.push_back(
      row<int>("--master-port", "port of rank 0's store", S::placement, GS_FIELD(c.master_port), {}, {}, false));
  return t;
}

#undef GS_FIELD

}  // namespace

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

const TrainOption& train_option(std::string_view flag) {
  for (const auto& o : train_options())
    if (o.flag == flag) return o;
  throw Error("gradscope train has no option " + std::string(flag));
}

void TrainConfig::validate() const {
  for (const auto& o : train_options()) o.check(*this);
  (void)run_density();  // a --ratio that does nothing is refused
  // A compressor option the method does not read (--bits for sidco-e) would do nothing: refused.
  compress::check_options_read(compressor, compress::options_set(compression));
  warmup().check(compress::density_based(compressor), compressor,
                 {"--warmup-steps", "--warmup-schedule", "--warmup-start-ratio", "--ratio"});
  schedule().check(compress::density_based(compressor), compressor, density,
                   {"--density-schedule", "--density-high", "--density-interval", "--density-eta", "--ratio"});
  if (exchange == "shared" || exchange == "sparse-allreduce")
    compress::check_shared_exchange(compressor, "--exchange " + exchange);
  if (compress_when != "auto" && compress_when_interval != TrainConfig{}.compress_when_interval)
    throw Error("--compress-when-interval does nothing without --compress-when auto: drop it");
  if (rank >= workers) throw Error("--rank must be below --workers (world size)");
  if (!checkpoint.empty() && checkpoint_every == 0)
    throw Error("--checkpoint " + checkpoint + " needs --checkpoint-every N (steps between checkpoints)");
  if (checkpoint.empty() && checkpoint_every > 0)
    throw Error("--checkpoint-every needs --checkpoint DIR (where to write them)");
  if (!record.empty() && (!resume.empty() || max_restarts > 0))
    throw Error("--record writes one snapshot from the first step; it cannot be combined with " +
                std::string(resume.empty() ? "--max-restarts" : "--resume"));
  if (max_restarts > 0 && (workers < 2 || rank >= 0))
    throw Error("--max-restarts needs the launcher: --workers 2 or more, without --rank");
}

double TrainConfig::lr_at(std::int64_t step, std::int64_t total) const {
  if (total <= 1 || lr_schedule == "constant") return lr;
  if (lr_schedule == "step") return step >= total - std::max<std::int64_t>(1, total / 10) ? 0.1 * lr : lr;
  constexpr double kPi = 3.14159265358979323846;
  return 0.5 * lr * (1.0 + std::cos(kPi * double(step) / double(total)));
}

double TrainConfig::run_density() const {
  const bool given = density != TrainConfig{}.density;
  return compress::density_for(compressor, given ? std::optional<double>(density) : std::nullopt, density, "--ratio");
}

compress::WarmupSchedule TrainConfig::warmup() const {
  return compress::WarmupSchedule::of(warmup_steps, warmup_schedule, warmup_start_density, run_density());
}

compress::DensitySchedule TrainConfig::schedule() const {
  compress::DensitySchedule s;
  s.kind = compress::DensitySchedule::parse_kind(density_schedule);
  s.high = density_high;
  s.interval = density_interval;
  s.eta = density_eta;
  return s;
}

compress::CompressorOptions TrainConfig::compressor_options(int r) const {
  compress::CompressorOptions o = compression;
  o.seed = compress::worker_seed(seed, std::uint64_t(r));
  return o;
}

std::vector<compress::Setting> TrainConfig::shared_settings() const {
  std::vector<compress::Setting> v;
  for (const auto& o : train_options())
    if (o.scope == OptionScope::shared && (!o.matters || o.matters(*this))) v.push_back({o.flag, o.get(*this)});
  return v;
}

std::string TrainConfig::shared_description() const {
  std::string s;
  for (const auto& [flag, value] : shared_settings()) {
    if (!s.empty()) s += ' ';
    s.append(flag, 2).append("=").append(value);
  }
  return s;
}

std::vector<std::string> TrainConfig::worker_args(int r, int port) const {
  std::vector<std::string> a;
  for (const auto& o : train_options()) {
    const bool passed =
        o.scope == OptionScope::shared || o.scope == OptionScope::worker || (o.scope == OptionScope::output && r == 0);
    if (!passed || (o.matters && !o.matters(*this))) continue;
    if (o.kind == ValueKind::flag) {
      if (o.get(*this) == "1") a.push_back(o.flag);
    } else if (!is_list(o.kind) || !o.get(*this).empty()) {
      if (o.scope == OptionScope::output && o.get(*this).empty()) continue;
      a.insert(a.end(), {o.flag, o.get(*this)});
    }
  }
  if (r != 0) a.push_back("--quiet");
  a.insert(a.end(), {"--rank", std::to_string(r), "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)});
  return a;
}

}  // namespace gs::distributed
