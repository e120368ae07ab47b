// BucketCompressor::exchange_resident: the DDP hook's buckets left on their device
// (gs/compress/bucket_compressor.hpp). The rules are the host path's; what differs is where the
// vectors live: residuals, selection and the update on the device, and across the bus only the
// selections (or nothing but counts, with device collectives).
#include <algorithm>
#include <cstring>

#include "gs/compress/bucket_compressor.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/device.hpp"
#include "gather_payloads.hpp"
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

void BucketCompressor::exchange_resident(const DeviceBucket& b, std::span<const BucketParam> params,
                                         Collectives& comm, DeviceCollectives* device_comm, bool last,
                                         std::span<const float> variance, double hook_seconds) {
  run_bucket(b.index, b.n, b.element_bytes, last, hook_seconds, comm,
             [&](TimedCollectives& timed, StepStats& s) {
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
    if (std::any_of(placed_.begin(), placed_.end(), [](const Placed& p) { return !p.layout.empty(); }))
      throw Error("bucket " + std::to_string(b.index) + ": this state keeps its residuals on the host; "
                  "give it host buckets (one state per device)");
    resident_ = std::make_unique<detail::ResidentResiduals>(ops);
  }
  const std::string slot = place(params, b.n, b.index);
  if (regimes_.on()) step_norm_ += ops.squared_norm(b.data, b.n);
  bool skipped = false;
  // A dense step on the device sends the bucket itself: only where nothing waits on the host to be
  // sent with it (residuals or velocities of compressed steps: the host path sends them).
  const bool host_state = momentum_.on() || gate_.on() || exchange_now(comm.world_size()) != ExchangeMode::allgather;
  if ((uncompressed_ && !host_state) || (compressor_->exchange() == Exchange::allreduce && !there)) {
    skipped = dense_on_device(b, slot, comm, device_comm, s);
  } else if (there) {
    skipped = sparse_on_device(b, slot, comm, device_comm, s);
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

bool BucketCompressor::dense_on_device(const DeviceBucket& b, const std::string& slot, TimedCollectives& comm,
                                       DeviceCollectives* device_comm, StepStats& s) {
  kernels::VectorOps& ops = *ops_;
  Compressor& c = uncompressed_ ? *dense_ : *compressor_;
  if (!device_comm) {  // through the host: Gloo reduces host memory
    std::vector<float> g(b.n), out(b.n);
    ops.download(g.data(), b.data, b.n * sizeof(float));
    const bool skipped = exchange_dense(c, slot, g, comm, out, s);
    if (!skipped) ops.upload(b.data, out.data(), b.n * sizeof(float));
    return skipped;
  }
  // "none": the bucket itself is the payload (its residual would stay 0: acc - acc).
  comm.timed([&] { device_comm->allreduce_sum(b.data, b.n); });
  if (ops.nonfinite(b.data, b.n) > 0) return true;  // the same sum everywhere: one decision
  ops.scale(b.data, 1.0f / float(comm.world_size()), b.n);
  const std::uint64_t bytes = 4 * b.n;
  s.n += b.n;
  s.selected += b.n;
  s.bytes_sent += bytes;
  s.gathered_bytes += bytes;
  return false;
}

bool BucketCompressor::sparse_on_device(const DeviceBucket& b, const std::string& slot, TimedCollectives& comm,
                                        DeviceCollectives* device_comm, StepStats& s) {
  Compressor& c = *compressor_;
  const float* acc = resident_->accumulate(slot, b.data, b.n);
  if (device_comm) return pairs_on_device(b, slot, acc, comm, *device_comm, s);
  // Through the host (Gloo): the selection and its report come to the host once, to be encoded.
  Compressed mine = c.compress_resident(acc, b.n, tensor_name(c, slot, b.index));
  const kernels::Selector::Resident sel = mine.info.n > 0 ? c.resident_selection() : kernels::Selector::Resident{};
  if (sel.count != mine.payload.count())
    throw Error("bucket " + std::to_string(b.index) + ": the device holds a selection of " +
                std::to_string(sel.count) + ", the payload " + std::to_string(mine.payload.count()) +
                " (please report)");
  const bool bad = mine.info.nonfinite > 0;  // this worker met NaN or Inf: it says so, all skip
  std::uint64_t wire_bytes = 0;
  if (pairs_through_host(b, slot, mine.payload, sel, bad, comm, s, wire_bytes)) {
    resident_->discard(slot);
    return true;
  }
  resident_->zero_sent(slot, sel.indices, sel.count);
  s.n += b.n;
  s.bytes_sent += wire_bytes;
  count_group(s, mine.info);
  PendingCommit commit;
  commit.slot = slot;
  commit.resident = true;
  pending_.push_back(std::move(commit));
  return false;
}

void BucketCompressor::add_every_rank(const DeviceBucket& b, int workers, const std::function<void(int)>& add_rank) {
  // As Compressor::aggregate: zeros, every worker's pairs in rank order, then the mean.
  ops_->fill(b.data, 0.0f, b.n);
  for (int r = 0; r < workers; ++r) add_rank(r);
  ops_->scale(b.data, 1.0f / float(workers), b.n);
}

// With device collectives nothing is read back: the selection stays where it was made, packed into
// a send buffer of fixed capacity (twice the target count, the same on every worker) with its
// count in the first slot; the counts travel with the pairs, and the device decides from them
// whether a worker met NaN or Inf (the bucket then skips everywhere) and adds every worker's pairs
// in rank order. The bucket's figures (selected, stages, skip, overflow) are written by the device
// into host memory and read when the step settles.
bool BucketCompressor::pairs_on_device(const DeviceBucket& b, const std::string& slot, const float* acc,
                                       TimedCollectives& comm, DeviceCollectives& device_comm, StepStats& s) {
  kernels::VectorOps& ops = *ops_;
  Compressor& c = *compressor_;
  const kernels::Selector::Resident sel = c.select_resident(acc, b.n, tensor_name(c, slot, b.index));
  if (!sel.report)
    throw Error("bucket " + std::to_string(b.index) + ": compressor '" + std::string(c.name()) +
                "' left no selection report on the device (please report)");
  const std::uint64_t twice_k = 2 * fitting::target_count(b.n, c.density());
  const std::uint64_t capacity = std::min<std::uint64_t>(b.n, std::max<std::uint64_t>(1, twice_k));
  const auto workers = std::uint64_t(comm.world_size());
  if (!step_skip_.data()) step_skip_ = ops.ints(1);
  if (!step_skip_clear_) ops.fill(step_skip_.data(), 0, 1);
  step_skip_clear_ = true;
  const detail::ResidentResiduals::Room& room = resident_->gather_room(slot, capacity, workers);
  std::int32_t* const send_idx = room.send_idx.data();
  float* const send_val = room.send_val.data();
  std::int32_t* const bucket_skip = room.skip.data();
  ops.pack_pairs(sel.indices, sel.values, sel.report, capacity, send_idx, send_val);
  comm.timed([&] {
    device_comm.allgather(send_idx, send_val, capacity + 1, room.idx_all.data(), room.val_all.data());
  });
  ops.add_gathered(b.data, b.n, room.idx_all.data(), room.val_all.data(), capacity, int(workers), bucket_skip,
                   step_skip_.data());
  resident_->zero_sent(slot, send_idx, capacity, bucket_skip);
  kernels::ExchangeReport* report = next_report();
  ops.report_exchange(sel.report, send_idx, capacity, bucket_skip, report);
  reports_.push_back({report, b.n});
  s.n += b.n;
  s.gathered_bytes += 8 * (capacity + 1);
  PendingCommit commit;
  commit.slot = slot;
  commit.resident = true;
  commit.device_skip = true;
  pending_.push_back(std::move(commit));
  return false;  // whether it skipped, the device knows (the step's figures say it when settled)
}

bool BucketCompressor::pairs_through_host(const DeviceBucket& b, const std::string& slot, const Payload& mine,
                                          const kernels::Selector::Resident& sel, bool bad, TimedCollectives& comm,
                                          StepStats& s, std::uint64_t& wire_bytes) {
  kernels::VectorOps& ops = *ops_;
  std::vector<std::byte> wire;
  if (!bad) wire = encode(mine, wire_bytes);
  const auto payloads = detail::gather_payloads(comm, wire, b.n, "bucket " + std::to_string(b.index), s.gathered_bytes);
  if (!payloads) return true;  // a worker met NaN or Inf
  std::uint64_t most = 0;
  for (const Payload& p : *payloads) {
    if (p.kind != PayloadKind::sparse)
      throw Error("bucket " + std::to_string(b.index) + ": a worker sent a dense payload where sparse ones travel "
                  "(do all workers use the same compressor?)");
    most = std::max<std::uint64_t>(most, p.count());
  }
  // The others' selections come up (the host all-gather's part of the bus); this worker's own is
  // on the device already.
  const detail::ResidentResiduals::Room& room =
      resident_->upload_room(slot, most, 2 * fitting::target_count(b.n, compressor_->density()));
  std::int32_t* const up_idx = room.up_idx.data();
  float* const up_val = room.up_val.data();
  add_every_rank(b, comm.world_size(), [&](int r) {
    if (r == comm.rank()) {
      ops.scatter_add(b.data, sel.indices, sel.values, sel.count);
      return;
    }
    const Payload& p = (*payloads)[std::size_t(r)];
    // Counted by the copies that carry them: what the worker's pairs are, whatever else this
    // thread moved meanwhile (the step's total is the thread's count, bus_bytes()).
    const std::uint64_t idx_bytes = p.indices.size() * sizeof(std::int32_t);
    const std::uint64_t val_bytes = p.values.size() * sizeof(float);
    ops.upload(up_idx, p.indices.data(), idx_bytes);
    ops.upload(up_val, p.values.data(), val_bytes);
    s.host_device_gathered_bytes += idx_bytes + val_bytes;
    ops.scatter_add(b.data, up_idx, up_val, p.count());
  });
  return false;
}

}  // namespace gs::compress
