// The all-gather exchange (bucket_exchange.hpp): every worker's sparse payload, all-gathered,
// decoded and summed in rank order. On a device (BucketCompressor::exchange_resident) the
// residuals, the selection and the update stay there; across the bus go only the selections, or
// nothing but counts with device collectives.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bucket_exchange.hpp"
#include "gather_payloads.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "host_vectors.hpp"

namespace gs::compress::detail {
namespace {

class AllgatherExchange final : public BucketExchange {
 public:
  std::string_view name() const override { return "allgather"; }

  bool host(BucketWork& w, std::span<const float> g, std::span<const float> variance, Collectives& comm,
            std::span<float> out, StepStats& s) override {
    Compressor& c = w.c;
    const bool ef = c.error_feedback();
    // The variance compressor refuses non-finite input rather than counting it (info.nonfinite, as
    // the others do): look first, and give it the step's variance only when it will compress.
    const bool weighs_variance = c.needs_gradient_variance();
    const bool bad_input = weighs_variance && any_nonfinite(g);
    const bool velocity = w.momentum.on();  // error feedback on the velocity, not on g
    // What the selection reads first of acc (SIDCo's stage 1 on the host), taken by the pass that
    // writes acc: one read of the bucket fewer.
    StatsOnWrite first;
    const auto fields = bad_input ? std::nullopt : c.stats_on_write();
    if (fields) first.fields = *fields;
    const auto acc = w.momentum.accumulate(w.slot, g, ef ? &w.residual : nullptr, fields ? &first : nullptr);
    Compressed mine;
    if (!bad_input) {
      if (weighs_variance) c.add_gradient_variance(w.tensor, variance);
      mine = first.taken ? c.compress_given(acc, w.tensor, *first.taken) : c.compress(acc, w.tensor);
    }
    std::vector<std::byte> wire;
    std::uint64_t wire_bytes = 0;
    if (!bad_input && mine.info.nonfinite == 0) wire = encode(mine.payload, wire_bytes);
    const auto payloads = gather_payloads(comm, wire, g.size(), "bucket '" + w.tensor + "'", s.gathered_bytes);
    if (!payloads) {  // a worker met NaN or Inf
      if (ef) w.residual.discard(w.slot);
      if (velocity) w.momentum.discard(w.slot);
      return true;
    }
    c.aggregate(*payloads, out);
    s.n += g.size();
    s.bytes_sent += wire_bytes;
    count_group(s, mine.info);
    if (ef) {
      PendingCommit& commit = w.commit(this);
      commit.payload = std::move(mine.payload);
      commit.velocity = velocity;
    }
    return false;
  }

  bool device(BucketWork& w, const DeviceBucket& b, TimedCollectives& comm, DeviceCollectives* device_comm,
              StepStats& s) override {
    Compressor& c = w.c;
    // The bucket is left holding zeros, where its update is summed; with device collectives the
    // step's skip flag is cleared in the same pass, by the step's first bucket.
    std::int32_t* clear = nullptr;
    if (device_comm) {
      StepLedger& ledger = w.ledger;
      if (!ledger.step_skip.data()) ledger.step_skip = w.ops->ints(1);
      if (!ledger.step_skip_clear) clear = ledger.step_skip.data();
      ledger.step_skip_clear = true;
    }
    const float* acc = w.resident->accumulate_clearing(w.slot, b.data, b.n, clear);
    if (device_comm) return pairs_on_device(w, b, acc, comm, *device_comm, s);
    // Through the host (Gloo): the selection and its report come to the host once, to be encoded.
    Compressed mine = c.compress_resident(acc, b.n, w.tensor);
    const kernels::Selector::Resident sel = mine.info.n > 0 ? c.resident_selection() : kernels::Selector::Resident{};
    if (sel.count != mine.payload.count())
      throw Error("bucket " + std::to_string(b.index) + ": the device holds a selection of " +
                  std::to_string(sel.count) + ", the payload " + std::to_string(mine.payload.count()) +
                  " (please report)");
    const bool bad = mine.info.nonfinite > 0;  // this worker met NaN or Inf: it says so, all skip
    std::uint64_t wire_bytes = 0;
    if (pairs_through_host(w, b, mine.payload, sel, bad, comm, s, wire_bytes)) {
      w.resident->discard(w.slot);
      return true;
    }
    w.resident->zero_sent(w.slot, sel.indices, sel.count);
    s.n += b.n;
    s.bytes_sent += wire_bytes;
    count_group(s, mine.info);
    w.commit(this).resident = true;
    return false;
  }

 private:
  // With device collectives nothing is read back: the selection stays where it was made, packed
  // into a send buffer of fixed capacity (twice the target count, the same on every worker) with
  // its count in the first slot; the counts travel with the pairs, and the device decides from
  // them whether a worker met NaN or Inf (the bucket then skips everywhere) and adds every
  // worker's pairs in rank order. The bucket's figures (selected, stages, skip, overflow) are
  // written by the device into host memory and read when the step settles.
  bool pairs_on_device(BucketWork& w, const DeviceBucket& b, const float* acc, TimedCollectives& comm,
                       DeviceCollectives& device_comm, StepStats& s) {
    kernels::VectorOps& ops = *w.ops;
    Compressor& c = w.c;
    StepLedger& ledger = w.ledger;
    const kernels::Selector::Resident sel = c.select_resident(acc, b.n, w.tensor);
    if (!sel.report)
      throw Error("bucket " + std::to_string(b.index) + ": compressor '" + std::string(c.name()) +
                  "' left no selection report on the device (please report)");
    const std::uint64_t twice_k = 2 * fitting::target_count(b.n, c.density());
    const std::uint64_t capacity = std::min<std::uint64_t>(b.n, std::max<std::uint64_t>(1, twice_k));
    const auto workers = std::uint64_t(comm.world_size());
    const ResidentResiduals::Room& room = w.resident->gather_room(w.slot, capacity, workers);
    std::int32_t* const send_idx = room.send_idx.data();
    float* const send_val = room.send_val.data();
    std::int32_t* const bucket_skip = room.skip.data();
    ops.pack_pairs(sel.indices, sel.values, sel.report, capacity, send_idx, send_val);
    comm.timed(
        [&] { device_comm.allgather(send_idx, send_val, capacity + 1, room.idx_all.data(), room.val_all.data()); });
    ops.add_gathered_onto_zeros(b.data, b.n, room.idx_all.data(), room.val_all.data(), capacity, int(workers),
                                bucket_skip, ledger.step_skip.data());
    kernels::ExchangeReport* report = ledger.next_report(ops);
    w.resident->zero_sent_and_report(w.slot, send_idx, capacity, bucket_skip, sel.report, report);
    ledger.reports.push_back({report, b.n});
    s.n += b.n;
    s.gathered_bytes += 8 * (capacity + 1);
    PendingCommit& commit = w.commit(this);
    commit.resident = true;
    commit.device_skip = true;
    return false;  // whether it skipped, the device knows (the step's figures say it when settled)
  }

  bool pairs_through_host(BucketWork& w, const DeviceBucket& b, const Payload& mine,
                          const kernels::Selector::Resident& sel, bool bad, TimedCollectives& comm, StepStats& s,
                          std::uint64_t& wire_bytes) {
    kernels::VectorOps& ops = *w.ops;
    std::vector<std::byte> wire;
    if (!bad) wire = encode(mine, wire_bytes);
    const auto payloads = gather_payloads(comm, wire, b.n, "bucket " + std::to_string(b.index), s.gathered_bytes);
    if (!payloads) return true;  // a worker met NaN or Inf
    std::uint64_t most = 0;
    for (const Payload& p : *payloads) {
      if (p.kind != PayloadKind::sparse)
        throw Error("bucket " + std::to_string(b.index) +
                    ": a worker sent a dense payload where sparse ones "
                    "travel (do all workers use the same compressor?)");
      most = std::max<std::uint64_t>(most, p.count());
    }
    // The others' selections come up (the host all-gather's part of the bus); this worker's own is
    // on the device already.
    const ResidentResiduals::Room& room =
        w.resident->upload_room(w.slot, most, 2 * fitting::target_count(b.n, w.run.density()));
    std::int32_t* const up_idx = room.up_idx.data();
    float* const up_val = room.up_val.data();
    // As Compressor::aggregate: zeros (the bucket's, left by accumulate_clearing), every worker's
    // pairs in rank order, then the mean.
    for (int r = 0; r < comm.world_size(); ++r) {
      if (r == comm.rank()) {
        ops.scatter_add(b.data, sel.indices, sel.values, sel.count);
        continue;
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
    }
    ops.scale(b.data, 1.0f / float(comm.world_size()), b.n);
    return false;
  }
};

}  // namespace

std::unique_ptr<BucketExchange> make_allgather_exchange() { return std::make_unique<AllgatherExchange>(); }

}  // namespace gs::compress::detail
