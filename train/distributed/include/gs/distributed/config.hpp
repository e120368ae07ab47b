#pragma once
// TrainConfig: everything `gradscope train` takes. One table of options (train_options()) says, for
// each setting, its flag, help text, how it reads and writes as text, how it is checked and whether
// every worker must share it; the CLI's flags, validate(), the description workers compare, the
// launcher's worker arguments and the --json echo are all generated from it.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/option_table.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/agreement.hpp"
#include "gs/compress/step_rules.hpp"

namespace gs::distributed {

struct TrainConfig {
  std::string model = "mlp";
  std::string compressor = "sidco-e";
  double density = 0.01;  // target density: fraction of elements sent (flag --ratio)
  // The compressor's own options (SIDCo stages, kernels backend, the rival methods' settings);
  // its seed is not used: compressor_options() derives one per worker from `seed`.
  compress::CompressorOptions compression;
  int workers = 1;
  std::int64_t steps = 0;  // 0: as many as the epochs give
  int epochs = 1;
  std::string granularity = "model";  // layer | model | bucket
  std::uint64_t bucket_size = 1 << 20;
  std::int64_t batch = 64;
  double lr = 0.05;
  double momentum = 0.9;
  // Learning rate over the run: constant; cosine (lr * (1 + cos(pi * step / steps)) / 2, from lr
  // at the first step towards 0 at the last); or step (lr / 10 over the last tenth of the steps,
  // at least the last one; a run of one step keeps lr).
  std::string lr_schedule = "constant";
  // Momentum correction with momentum factor masking (DGC): the momentum moves from the optimizer
  // into each worker's compressor (sparse compressors with error feedback only).
  bool momentum_correction = false;
  // Warm-up over the first warmup_steps steps: dense exchanges the gradient uncompressed;
  // exponential (DGC's) compresses at a density falling geometrically from warmup_start_density
  // at the first step towards `density`, which it reaches at step warmup_steps.
  std::int64_t warmup_steps = 0;
  std::string warmup_schedule = "dense";
  double warmup_start_density = 0.25;
  // The density after the warm-up (gs::compress::DensitySchedule): constant (`density`), or
  // accordion: `density_high` in a critical regime, detected every `density_interval` steps by a
  // relative change of the gradient's norm of at least `density_eta`, else `density`.
  std::string density_schedule = "constant";
  double density_high = 0.1;
  std::int64_t density_interval = 20;
  double density_eta = 0.5;
  // Compression only when it pays (gs::compress::CompressionGate): always, or auto (dense while
  // dense is the faster exchange, looked at again every compress_when_interval steps times the
  // ratio of the two times).
  std::string compress_when = "always";
  std::int64_t compress_when_interval = 50;
  // allgather: every worker's (index, value) pairs to every worker; shared: the workers' values at
  // one set of indices per group, a rotating leader's selection (bytes flat in the workers).
  std::string exchange = "allgather";
  std::uint64_t seed = 1;
  std::string record;  // snapshot of rank 0's raw gradients, when set
  // Checkpoints (gs/distributed/checkpoint.hpp): every checkpoint_every steps into `checkpoint`, the
  // latest keep_checkpoints kept; resume
  // from the latest complete one under `resume`; the launcher restarts every worker from the last
  // checkpoint up to max_restarts times when one dies.
  std::string checkpoint;
  std::int64_t checkpoint_every = 0;
  int keep_checkpoints = 2;  // complete checkpoints kept; older ones go once a new one verifies
  std::string resume;
  int max_restarts = 0;
  bool force = false;     // overwrite --record, replace --checkpoint's old checkpoints
  double timeout = 60.0;  // seconds any collective or rendezvous may wait
  bool json = false;
  bool quiet = false;
  // Worker placement: rank < 0 means "launch `workers` processes here".
  int rank = -1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  // gs::Error naming the first bad setting (each option's own check, then the rules that tie
  // several together).
  void validate() const;
  // The settings every worker must share (rank, output flags and settings that do not matter
  // excluded), named by their flags, in the table's order; and as one canonical line.
  std::vector<compress::Setting> shared_settings() const;
  std::string shared_description() const;
  // Arguments after "gradscope train" that reproduce this config for worker `rank`.
  std::vector<std::string> worker_args(int rank, int port) const;
  // The compressor's options for worker `rank` (its sampling seed differs per worker).
  compress::CompressorOptions compressor_options(int rank) const;
  // The density the compressor runs at: --ratio for a density-based compressor, 1 for any other,
  // which refuses a --ratio other than the default (compress::density_for).
  double run_density() const;
  // The learning rate of step `step` (0-based) of a run of `total` steps.
  double lr_at(std::int64_t step, std::int64_t total) const;
  // The warm-up as the shared rule (gs/compress/step_rules.hpp) reads it.
  compress::WarmupSchedule warmup() const;
  // Whether warm-up steps are compressed at a falling density (else they go uncompressed).
  bool exponential_warmup() const { return warmup().exponential(); }
  // The density schedule as the shared rule reads it.
  compress::DensitySchedule schedule() const;
};

// Who an option concerns: every worker alike (compared at start), each worker on its own
// (passed on, not compared: the kernels backend, the timeout), where a worker sits (rank, store
// address), rank 0's output, or the launcher alone (not passed to workers).
enum class OptionScope { shared, worker, placement, output, launcher };

// One row of the option table: how the value reads and is checked (gs::OptionRow), who it
// concerns, and whether it matters for a given config (null: always; the comparison line and the
// worker arguments leave out what does not).
struct TrainOption : OptionRow<TrainConfig> {
  OptionScope scope = OptionScope::shared;
  bool in_json = true;  // echoed in --json's "config" under key()
  std::function<bool(const TrainConfig&)> matters;
};

// Every option of `gradscope train`, in the order --help lists them.
const std::vector<TrainOption>& train_options();
// The option of a flag ("--ratio"); gs::Error for an unknown flag.
const TrainOption& train_option(std::string_view flag);

}  // namespace gs::distributed
