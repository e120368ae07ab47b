// The own-rounds exchange (bucket_exchange.hpp): a compressor's own collective rounds (PowerSGD),
// with error feedback on what its rounds decoded this worker's contribution to.
#include <cstdint>
#include <vector>

#include "bucket_exchange.hpp"
#include "host_vectors.hpp"

namespace gs::compress::detail {
namespace {

class OwnRoundsExchange final : public BucketExchange {
 public:
  std::string_view name() const override { return "own-rounds"; }

  bool host(BucketWork& w, std::span<const float> g, std::span<const float>, Collectives& comm, std::span<float> out,
            StepStats& s) override {
    Compressor& c = w.c;
    // The compressor's rounds cannot carry a flag: agree on skipping first, in one small round.
    std::int32_t flag = any_nonfinite(g) ? 1 : 0;
    comm.allreduce_sum(std::span<std::int32_t>(&flag, 1));
    if (flag > 0) return true;
    const bool ef = c.error_feedback();
    const auto acc = ef ? w.residual.accumulate(w.slot, g) : g;
    std::vector<float> sent(g.size());
    const auto r = c.exchange(acc, w.tensor, comm, sent, out);
    if (ef) w.commit(this).sent = std::move(sent);
    s.n += g.size();
    s.bytes_sent += r.wire_bytes;
    s.gathered_bytes += r.wire_bytes;
    count_group(s, r.info);
    return false;
  }
};

}  // namespace

std::unique_ptr<BucketExchange> make_own_rounds_exchange() { return std::make_unique<OwnRoundsExchange>(); }

}  // namespace gs::compress::detail
