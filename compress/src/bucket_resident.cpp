// BucketCompressor::exchange_resident: the DDP hook's buckets left on their device
// (gs/compress/bucket_compressor.hpp). The rules are the host path's; what differs is where the
// vectors live: residuals, selection and the update on the device, and across the bus only the
// selections (or nothing but counts, with device collectives). The exchanges that run there are
// the dense one and the all-gather (exchange_dense.cpp, exchange_allgather.cpp).
#include <algorithm>
#include <cstring>

#include "gs/compress/bucket_compressor.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/device.hpp"
#include "bucket_exchange.hpp"
#include "parameter_placement.hpp"
#include "residual_slots.hpp"
#include "timed_collectives.hpp"

namespace gs::compress {

bool BucketCompressor::selects_on(kernels::BackendKind backend, int workers) const {
  const Compressor& c = *compressor_;
  // Momentum correction's velocity lives in host memory, and compress-when auto and the shared
  // exchange run on the host: such buckets take the host path.
  return c.resident_backend() == backend && c.exchange() == Exchange::allgather && c.error_feedback() &&
         !momentum_.on() && !gate_.on() && exchange_now(workers) == ExchangeMode::allgather;
}

void BucketCompressor::exchange_resident(const DeviceBucket& b, std::span<const BucketParam> params, Collectives& comm,
                                         DeviceCollectives* device_comm, bool last, std::span<const float> variance,
                                         double hook_seconds) {
  run_bucket(b.index, b.n, b.element_bytes, last, hook_seconds, comm, [&](TimedCollectives& timed, StepStats& s) {
    if (b.backend == kernels::BackendKind::cpu)
      throw Error("bucket " + std::to_string(b.index) + ": the cpu backend has no device; exchange host buckets");
    if (!ops_) {
      ops_ = kernels::make_vector_ops(b.backend, b.device);
    } else if (ops_->device() != b.device || ops_->kind() != b.backend) {
      throw Error("bucket " + std::to_string(b.index) + " is on " + std::string(kernels::to_string(b.backend)) +
                  " device " + std::to_string(b.device) + ", this state's buckets on " +
                  std::string(kernels::to_string(ops_->kind())) + " device " + std::to_string(ops_->device()) +
                  ": one state serves one device (DDP: one state per process)");
    }
    // First, before any other runtime call of this thread: rank r's worker works on GPU r.
    ops_->bind_thread();
    return exchange_on_device(b, params, timed, device_comm, variance, s);
  });
}

bool BucketCompressor::exchange_on_device(const DeviceBucket& b, std::span<const BucketParam> params,
                                          TimedCollectives& comm, DeviceCollectives* device_comm,
                                          std::span<const float> variance, StepStats& s) {
  kernels::VectorOps& ops = *ops_;
  const bool there = selects_on(b.backend, comm.world_size());
  if (there && !resident_) {
    if (placement_->any_placed())
      throw Error("bucket " + std::to_string(b.index) +
                  ": this state keeps its residuals on the host; "
                  "give it host buckets (one state per device)");
    resident_ = std::make_unique<detail::ResidentResiduals>(ops);
  }
  const std::string slot = place(params, b.n, b.index);
  if (regimes_.on()) step_norm_ += ops.squared_norm(b.data, b.n);
  bool skipped = false;
  // A dense step on the device sends the bucket itself: only where nothing waits on the host to be
  // sent with it (residuals or velocities of compressed steps: the host path sends them).
  const bool host_state = momentum_.on() || gate_.on() || exchange_now(comm.world_size()) != ExchangeMode::allgather;
  const std::string tensor = detail::tensor_name(*compressor_, slot, b.index);
  detail::BucketWork w = work(b.index, slot, tensor);
  if ((uncompressed_ && !host_state) || (compressor_->exchange() == Exchange::allreduce && !there)) {
    skipped = strategy("dense").device(w, b, comm, device_comm, s);
  } else if (there) {
    skipped = strategy("allgather").device(w, b, comm, device_comm, s);
  } else {
    // Host rules (randomk, the quantizers, fft, variance): the bucket down, its update up.
    std::vector<float> g(b.n), out(b.n);
    ops.download(g.data(), b.data, b.n * sizeof(float));
    skipped = exchange_host(b.index, slot, g, variance, comm, out, s);
    if (!skipped) ops.upload(b.data, out.data(), b.n * sizeof(float));
  }
  if (skipped) ops.fill(b.data, 0.0f, b.n);
  return skipped;
}

}  // namespace gs::compress
