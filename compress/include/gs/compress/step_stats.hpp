#pragma once
// StepStats: the one record of what a compressed step cost and achieved, for one worker. The
// compressors fill it (ModelCompressor for a whole model, BucketCompressor over a step's buckets),
// RunStatistics sums it over a run, gradscope train's StepReport carries it beside what training
// adds (the step's loss, learning rate and wall time), and gradscope.ddp.StepStats is its Python
// face (python/src/stats_fields.hpp).
#include <cstdint>
#include <limits>
#include <vector>

namespace gs::compress {

struct StepStats {
  std::uint64_t n = 0;
  std::uint64_t selected = 0;
  double target_density = 1.0;
  std::vector<double> group_quality;  // quality of each group's selection, in group order
  int stages = 0;                     // SIDCo stages in use this step (0 otherwise)
  int corrected = 0;                  // SIDCo: the groups (buckets) whose count correction ran
  int exact = 0;                      // the groups whose selection ended on an exact top-k
  // SIDCo's own estimate, before any correction, over the groups that had one: their elements
  // and what the estimate selected there (estimate_quality()).
  std::uint64_t estimate_n = 0;
  std::uint64_t estimate_selected = 0;
  std::uint64_t bytes_sent = 0;       // this worker's payload on the wire
  std::uint64_t dense_bytes = 0;      // 4 n: what sending the gradient uncompressed costs
  double compress_seconds = 0.0;      // residual + selection + packing (+ decoding, in step())
  double compress_cpu_seconds = 0.0;  // the same work in its thread's CPU time (a hook thread that
                                      // shares a core with backward waits; this does not count it)
  double comm_seconds = 0.0;          // step() only: time inside collectives
  // BucketCompressor's steps (a step of several exchanges) also count:
  std::uint64_t gathered_bytes = 0;  // what the all-gathers carried for this worker: whole
                                     // encodings, padded to the longest worker's
  double hook_seconds = 0.0;         // inside the framework's hook calls
  // What this worker's link sent for the step's host collectives, as scripts/exchange_model.py
  // models their algorithms (TimedCollectives::link_bytes): ring all-reduces, ring all-gathers of
  // the longest contribution, all-to-alls; headers, device collectives and the workers' agreement
  // on their settings (once per process) left out.
  std::uint64_t link_bytes = 0;
  // Device buckets (BucketCompressor::exchange_resident): bytes that crossed between host and
  // device memory, both ways, and the part of them that was other workers' selections arriving
  // through a host all-gather (Gloo) on their way to the device.
  std::uint64_t host_device_bytes = 0;
  std::uint64_t host_device_gathered_bytes = 0;
  // Blocking synchronizations the host made for them (a value read back, a stream waited for).
  std::uint64_t host_syncs = 0;
  // What the step queued on devices (kernels::DeviceWork, counted alike by the CUDA and cuda-host
  // backends): kernel launches, those of a single thread, allocations (device pool and pinned),
  // events created, CUB scratch-size queries, and the elements the passes went over (over n: how
  // many times the step read its gradients).
  std::uint64_t launches = 0;
  std::uint64_t single_thread_launches = 0;
  std::uint64_t allocations = 0;
  std::uint64_t events_created = 0;
  std::uint64_t scratch_queries = 0;
  std::uint64_t elements_passed = 0;
  // With device collectives: pairs a selection held beyond the all-gather's fixed capacity (twice
  // the target count), left in the residual (the lowest indices are sent, alike on every worker).
  std::uint64_t overflow = 0;
  int buckets = 0;
  bool skipped = false;   // NaN/Inf on some worker: zeros instead, residual untouched
  bool warmup = false;    // a warm-up step
  bool dense = false;     // sent uncompressed: a dense warm-up step, density 1, or
                          // compress-when auto's choice
  bool critical = false;  // at the high density of a critical regime (DensitySchedule)
  // The exchange a compressed step's selections went by (an ExchangeMode: 0 allgather, 1 shared,
  // 2 sparse-allreduce; with exchange auto, the one it chose).
  std::uint8_t exchange = 0;

  double density() const { return n ? double(selected) / double(n) : 0.0; }
  double quality() const { return target_density > 0 ? density() / target_density : 0.0; }
  // The achieved/target density SIDCo's own threshold gave before any correction: the
  // element-weighted mean over the groups that had an estimate (NaN where none had: another
  // method, a dense step).
  double estimate_quality() const {
    return estimate_n && target_density > 0 ? double(estimate_selected) / double(estimate_n) / target_density
                                            : std::numeric_limits<double>::quiet_NaN();
  }
  // The groups (buckets) the step compressed: one quality each.
  int groups() const { return int(group_quality.size()); }
};

}  // namespace gs::compress
