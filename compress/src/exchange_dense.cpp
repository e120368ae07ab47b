// The dense exchange (bucket_exchange.hpp): one all-reduce of the whole vector.
#include <cstdint>
#include <string_view>
#include <vector>

#include "bucket_exchange.hpp"
#include "host_vectors.hpp"

namespace gs::compress::detail {
namespace {

class DenseExchange final : public BucketExchange {
 public:
  std::string_view name() const override { return "dense"; }

  bool host(BucketWork& w, std::span<const float> g, std::span<const float>, Collectives& comm,
            std::span<float> out, StepStats& s) override {
    // An uncompressed step (the dense warm-up, density 1, compress-when auto) sends the whole
    // accumulator, the residual and momentum correction's velocity included, so that error
    // feedback loses nothing: the residual is then empty and the velocity goes on unmasked
    // (momentum SGD over the step). A dense compressor (the quantizers' all-reduce) keeps its own
    // error feedback.
    Compressor& c = w.c;
    const bool flush = w.flush();
    const bool ef = flush ? w.run.error_feedback() : c.error_feedback();
    const bool velocity = flush && w.momentum.on();
    const auto u = velocity ? w.momentum.advance(w.slot, g) : g;
    const auto acc = ef ? w.residual.accumulate(w.slot, u) : u;
    Compressed mine = c.compress(acc, w.slot);
    // With error feedback the residual needs this worker's own payload after the sum: sum a copy.
    std::vector<float> summed;
    if (ef) summed = mine.payload.values;
    std::span<float> sum = ef ? std::span<float>(summed) : std::span<float>(mine.payload.values);
    comm.allreduce_sum(sum);
    // Every worker holds the same sum: one decision, no extra round.
    if (any_nonfinite(sum)) {
      if (ef) w.residual.discard(w.slot);
      if (velocity) w.momentum.discard(w.slot);
      return true;
    }
    const std::uint64_t wire_bytes = mine.payload.wire_bytes();
    if (ef || velocity) {
      PendingCommit& commit = w.commit(this);
      commit.payload = mine.payload;
      commit.residual = ef;
      commit.velocity = velocity;
      commit.dense_with = flush ? &c : nullptr;
      if (ef) mine.payload.values = std::move(summed);
    }
    c.decode_sum(mine.payload, comm.world_size(), out);
    s.n += g.size();
    s.selected += mine.info.selected;
    s.bytes_sent += wire_bytes;
    s.gathered_bytes += wire_bytes;
    return false;
  }

  bool device(BucketWork& w, const DeviceBucket& b, TimedCollectives& comm, DeviceCollectives* device_comm,
              StepStats& s) override {
    kernels::VectorOps& ops = *w.ops;
    if (!device_comm) {  // through the host: Gloo reduces host memory
      std::vector<float> g(b.n), out(b.n);
      ops.download(g.data(), b.data, b.n * sizeof(float));
      const bool skipped = host(w, g, {}, comm, out, s);
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
};

}  // namespace

std::unique_ptr<BucketExchange> make_dense_exchange() { return std::make_unique<DenseExchange>(); }

}  // namespace gs::compress::detail
