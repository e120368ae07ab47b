// The dense exchange (bucket_exchange.hpp): one all-reduce of the whole vector.
#include <algorithm>
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

  bool host(BucketWork& w, std::span<const float> g, std::span<const float>, Collectives& comm, std::span<float> out,
            StepStats& s) override {
    if (w.flush()) {  // the sum lands in out: no copy of the payload
      flush_dense(w, g, out);
      comm.allreduce_sum(out);
      return finish_dense(out, comm.world_size(), s);
    }
    // A dense compressor (the quantizers' all-reduce) keeps its own error feedback.
    Compressor& c = w.c;
    const bool ef = c.error_feedback();
    const auto acc = ef ? w.residual.accumulate(w.slot, g) : g;
    Compressed mine = c.compress(acc, w.slot);
    // With error feedback the residual needs this worker's own payload after the sum: sum a copy.
    std::vector<float> summed;
    if (ef) summed = mine.payload.values;
    std::span<float> sum = ef ? std::span<float>(summed) : std::span<float>(mine.payload.values);
    comm.allreduce_sum(sum);
    // Every worker holds the same sum: one decision, no extra round.
    if (any_nonfinite(sum)) {
      if (ef) w.residual.discard(w.slot);
      return true;
    }
    const std::uint64_t wire_bytes = mine.payload.wire_bytes();
    if (ef) {
      PendingCommit& commit = w.commit(this);
      commit.payload = mine.payload;
      mine.payload.values = std::move(summed);
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

void flush_dense(BucketWork& w, std::span<const float> g, std::span<float> payload) {
  // An uncompressed step (the dense warm-up, density 1, compress-when auto) sends the whole
  // accumulator, the residual and momentum correction's velocity included, so that error feedback
  // loses nothing: the residual is then empty and the velocity goes on unmasked (momentum SGD over
  // the step).
  const bool ef = w.run.error_feedback();
  const bool velocity = w.momentum.on();
  const auto u = velocity ? w.momentum.advance(w.slot, g) : g;
  const auto acc = ef ? w.residual.accumulate(w.slot, u) : u;
  if (acc.data() != payload.data()) std::copy(acc.begin(), acc.end(), payload.begin());
  if (!ef && !velocity) return;
  PendingCommit& commit = w.commit(nullptr);
  commit.residual = ef;
  commit.all_sent = ef;
  commit.velocity = velocity;
  commit.dense_with = &w.c;
}

bool finish_dense(std::span<float> sum, int workers, StepStats& s) {
  // Every worker holds the same sum: one decision, no extra round.
  if (any_nonfinite(sum)) return true;
  const float inv = 1.0f / float(workers);  // as Compressor::decode_sum scales
  for (float& v : sum) v *= inv;
  const std::uint64_t bytes = 4 * std::uint64_t(sum.size());  // float32 codes
  s.n += sum.size();
  s.selected += sum.size();
  s.bytes_sent += bytes;
  s.gathered_bytes += bytes;
  return false;
}

std::unique_ptr<BucketExchange> make_dense_exchange() { return std::make_unique<DenseExchange>(); }

}  // namespace gs::compress::detail
