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

struct StepReport {
  std::int64_t step = 0;
  int epoch = 0;
  double lr = 0.0;                // learning rate of this step (--lr-schedule)
  double loss = 0.0;              // mean over workers
  bool skipped = false;           // non-finite gradient somewhere: step skipped everywhere
  bool warmup = false;            // a warm-up step (--warmup-steps): uncompressed or at a higher ratio
  bool dense = false;             // sent uncompressed (a dense warm-up step, ratio 1, --compress-when auto)
  bool critical = false;          // in a critical regime (--density-schedule accordion): at --density-high
  double target_density = 1.0;    // the ratio this step aimed at (1 when uncompressed)
  double density = 0.0;           // achieved, this worker
  double quality = 0.0;           // density / target
  int stages = 0;                 // SIDCo stages in use
  std::uint64_t bytes_sent = 0;   // this worker's payload
  std::uint64_t dense_bytes = 0;  // what an uncompressed gradient costs
  double compress_seconds = 0.0;
  double comm_seconds = 0.0;
  double step_seconds = 0.0;
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
