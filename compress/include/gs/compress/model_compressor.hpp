#pragma once
// ModelCompressor: a compressor, its residual memory and a granularity, applied to a whole model's
// gradient laid out flat. compress() runs error feedback group by group and returns one payload
// over the flat index space (group payloads concatenated, indices shifted by the group's offset),
// which is what a worker exchanges once per step; aggregate() turns every worker's payload into the
// mean update. Framework-free: the torch adapter (train/distributed/) only copies tensors in and out.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/compress/grouping.hpp"
#include "gs/compress/momentum.hpp"
#include "gs/compress/residual.hpp"
#include "gs/compress/step_stats.hpp"

namespace gs::compress {

// What a ModelCompressor step is to do: the step's index (the shared exchange's leaders rotate
// with it), and whether it sends dense: the whole accumulator, the residual and momentum
// correction's velocity included, all-reduced (the dense warm-up, density 1, compress-when auto),
// after which the residual is empty and the velocity goes on unmasked.
struct StepPlan {
  std::int64_t step = 0;
  bool dense = false;
};

class ModelCompressor {
 public:
  ModelCompressor(std::vector<TensorSpec> tensors, Granularity granularity, std::uint64_t bucket_size,
                  std::unique_ptr<Compressor> compressor);

  std::uint64_t numel() const { return numel_; }
  const std::vector<Group>& groups() const { return groups_; }
  const Compressor& compressor() const { return *compressor_; }
  // The compressor's target density from the next step on (Compressor::set_density); the residual
  // memory carries over unchanged.
  void set_density(double density) { compressor_->set_density(density); }
  const ResidualMemory& residual() const { return residual_; }

  // One whole step of one worker, for every Exchange kind: error feedback, compression, exchange
  // through comm and decoding; out (numel() floats) = the mean update over workers. Every worker
  // calls it once per step, with the same plan (StepPlan).
  void step(std::span<const float> flat_grad, Collectives& comm, std::span<float> out, StepStats* stats = nullptr,
            StepPlan plan = {});

  // The shared exchange (BucketCompressor::set_shared_exchange's, per group): sparse, error-fed
  // compressors only (gs::Error otherwise). Before the first step.
  void set_shared_exchange(bool shared) { set_exchange(shared ? ExchangeMode::shared : ExchangeMode::allgather); }
  // The exchange of the selections (BucketCompressor::set_exchange's, per group); the sparse
  // all-reduce's regions are kept per group and checkpoint with the state.
  void set_exchange(ExchangeMode mode);

  // For compressors that needs_gradient_variance(): the model's per-element sum over the batch of
  // squared per-sample gradients / B^2, numel() floats laid out like the gradient; used by the next
  // step() or compress().
  void set_gradient_variance(std::span<const float> flat_v);

  // Momentum correction with momentum factor masking (gs/compress/momentum.hpp): each worker
  // keeps a velocity per group and error-feeds it instead of g. Sparse compressors with error
  // feedback only (gs::Error otherwise); m in [0, 1), 0 turns it off. Before the first step.
  void set_momentum_correction(double momentum);
  double momentum_correction() const { return momentum_.momentum(); }

  // allgather and allreduce kinds only. flat_grad: the model's gradient, numel() floats. Returns
  // this worker's payload for the step and ends the compressor's step (adaptive controllers
  // advance).
  Payload compress(std::span<const float> flat_grad, StepStats* stats = nullptr);
  // out (numel() floats) = mean over workers of their payloads (all-gather path).
  void aggregate(std::span<const Payload> payloads, std::span<float> out) const;
  // out = mean, from the element-wise sum of `workers` dense payloads (all-reduce path).
  void decode_sum(const Payload& summed, int workers, std::span<float> out) const;
  // Residual of the whole model laid out flat (numel() floats; zeros before the first step).
  std::vector<float> flat_residual() const;

  // Checkpoints, between steps: the residual memory, the momentum correction's velocity and the
  // compressor's own state. load_state() into a ModelCompressor built with the same tensors,
  // granularity and compressor continues exactly; gs::Error (through r) naming what differs.
  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  std::vector<Group> groups_;
  std::uint64_t numel_ = 0;
  std::unique_ptr<Compressor> compressor_;
  ResidualMemory residual_;
  std::vector<float> variance_;  // set_gradient_variance()'s input, until used
  MomentumCorrection momentum_;  // off unless set

  // acc for group g: g + e with error feedback, else g itself.
  std::span<const float> accumulate(const Group& g, std::span<const float> flat);
  void feed_variance(const Group& g);
  void step_collective(std::span<const float> flat, Collectives& comm, std::span<float> out, StepStats& s);
  void step_dense(std::span<const float> flat, Collectives& comm, std::span<float> out, StepStats& s);
  void step_sparse_allreduce(std::span<const float> flat, Collectives& comm, std::span<float> out, StepStats& s);
  void step_shared(std::span<const float> flat, std::int64_t step, Collectives& comm, std::span<float> out,
                   StepStats& s);
  ExchangeMode exchange_ = ExchangeMode::allgather;
  std::map<std::string, std::vector<std::uint64_t>> regions_;  // sparse-allreduce's bounds per group
};

}  // namespace gs::compress
