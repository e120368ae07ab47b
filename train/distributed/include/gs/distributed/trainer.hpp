#pragma once
// Compressed data-parallel training of a Fashion-MNIST model: each worker trains on its own shard,
// compresses its gradient with error feedback (gs::compress::ModelCompressor), exchanges payloads
// (all-gather, all-reduce or the compressor's own collectives, as it declares) and applies the
// workers' mean.
//
// Non-finite gradients: when any worker's gradient holds NaN or Inf, every worker skips the step
// (no residual update, no optimizer step) and counts it; 10 skipped steps in a row are an error.
//
// Test hook: GS_DIST_FAULT="rank=R,step=S,action=exit|kill|hang|nan|kill-in-checkpoint[,attempt=A|any]"
// makes worker R exit(7), die by SIGKILL, sleep forever, or poison its gradient with NaN at step S, or die by
// SIGKILL halfway through writing its file of the checkpoint after S steps, in the launcher's
// attempt A (default 0: not after a restart; any: in every attempt).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gs/compress/step_rules.hpp"
#include "gs/distributed/config.hpp"

namespace gs::distributed {

// One training step: what training adds (the step, its epoch, learning rate, loss and wall time)
// beside the compressed exchange's record, compress::StepStats (skipped, warm-up, dense, critical,
// target and achieved density, stages, bytes, compress and communication times), as the hook's
// steps carry it too.
struct StepReport {
  std::int64_t step = 0;
  int epoch = 0;
  double lr = 0.0;            // learning rate of this step (--lr-schedule)
  double loss = 0.0;          // mean over workers
  double step_seconds = 0.0;  // the whole step, this worker
  // skipped: a non-finite gradient somewhere, the step skipped everywhere; comm_seconds counts the
  // step's agreement on skipping as well as the exchange.
  compress::StepStats stats;
};

struct TrainResult {
  std::vector<StepReport> steps;
  double test_accuracy = 0.0;
  double final_loss = 0.0;
  double wall_seconds = 0.0;
  std::int64_t skipped_steps = 0;
  // Sum over workers of max |param - rank 0's param| at the end: 0 exactly when replicas agree.
  double replica_max_diff = 0.0;
  std::uint64_t parameters = 0;
  std::int64_t train_examples_per_worker = 0;
  // SHA-256 of rank 0's final parameters (flat float32, in parameter order): equal for two runs
  // exactly when they end with the same model. Rank 0 only.
  std::string param_digest;
  std::int64_t resumed_from = 0;  // steps done when the run resumed from a checkpoint (0: none)
};

// Summary figures over the non-skipped steps (for the report and docs/RESULTS.md): the shared
// run statistics (gs/compress/step_rules.hpp).
using TrainSummary = compress::RunSummary;
TrainSummary summarize(const TrainResult& r);

using StepCallback = std::function<void(const StepReport&, std::int64_t total_steps)>;

// One worker's whole run (rank/world size from config; world size 1 needs no store).
TrainResult train_worker(const TrainConfig& config, const StepCallback& on_step = {});

// The result as one JSON object (config echoed, summary, per-step arrays).
std::string to_json(const TrainConfig& config, const TrainResult& r);

}  // namespace gs::distributed
