#pragma once
// Momentum correction with momentum factor masking (Lin et al., DGC, ICLR 2018), the one rule
// ModelCompressor (`gradscope train --momentum-correction`) and BucketCompressor (the DDP hook's
// momentum_correction) apply, per vector, on each worker:
//   u = m u + g                  the worker's velocity, before sparsification
//   acc = e + u                  error feedback on the velocity
//   send part of acc; e = acc and u, both zeroed where sent (factor masking)
// The optimizer then applies the workers' mean update without a momentum of its own.
#include <span>
#include <string_view>

#include "gs/compress/compressor.hpp"
#include "gs/compress/residual.hpp"

namespace gs::compress {

// Whether momentum correction applies: it masks the coordinates a sparse, error-fed compressor sends.
bool supports_momentum_correction(const Compressor& c);

class MomentumCorrection {
 public:
  MomentumCorrection() = default;  // off
  // gs::Error for a momentum outside [0, 1), or above 0 with compressor c that does not
  // support_momentum_correction; `setting` names it in the caller's words for the message.
  MomentumCorrection(double momentum, const Compressor& c, std::string_view setting);
  double momentum() const { return momentum_; }
  bool on() const { return momentum_ > 0.0; }

  // u = m u + g for vector `name` (u starts at 0); returns the new u, which error feedback adds
  // the residual to. Pending until commit() or discard().
  // With stats, the pass takes stats->fields of what it returns on the way (StatsOnWrite).
  std::span<const float> advance(std::string_view name, std::span<const float> g, StatsOnWrite* stats = nullptr);
  // advance() and error feedback's residual.accumulate(name, u) in one pass over the vectors
  // (the same values: u = m u + g, acc = u + e); returns acc. Both are pending until committed.
  std::span<const float> advance_into(std::string_view name, std::span<const float> g, ResidualMemory& residual,
                                      StatsOnWrite* stats = nullptr);
  // The vector a compressor selects from, for either setting: with momentum correction on, u (and
  // with a residual, u + e in one pass); off, g + e with a residual, else g itself (which no pass
  // writes: stats->taken stays empty).
  std::span<const float> accumulate(std::string_view name, std::span<const float> g, ResidualMemory* residual,
                                    StatsOnWrite* stats = nullptr) {
    if (on()) return residual ? advance_into(name, g, *residual, stats) : advance(name, g, stats);
    return residual ? residual->accumulate(name, g, 1.0f, stats) : g;
  }
  // The step sent sparse payload p of that vector: u becomes the new u, zero where p was sent.
  void commit(std::string_view name, const Payload& p, const Compressor& c);
  // The step sent everything (an uncompressed step): u becomes the new u, unmasked.
  void keep(std::string_view name) { velocity_.keep(name); }
  // The step is dropped (skipped): u stays as it was.
  void discard(std::string_view name) { velocity_.discard(name); }

  // The velocities by vector name: for checkpoints, and for a caller that moves them between
  // vectors as it moves residuals (BucketCompressor when DDP regroups its parameters).
  ResidualMemory& velocities() { return velocity_; }
  const ResidualMemory& velocities() const { return velocity_; }

 private:
  double momentum_ = 0.0;
  ResidualMemory velocity_;
};

}  // namespace gs::compress
