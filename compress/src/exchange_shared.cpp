// The shared exchange (bucket_exchange.hpp, shared_exchange.hpp): the workers' values at a rotating
// leader's selection, all-reduced; every worker's own contribution leaves its residual.
#include <utility>

#include "bucket_exchange.hpp"
#include "shared_exchange.hpp"

namespace gs::compress::detail {
namespace {

class SharedExchange final : public BucketExchange {
 public:
  std::string_view name() const override { return "shared"; }

  bool host(BucketWork& w, std::span<const float> g, std::span<const float>, Collectives& comm, std::span<float> out,
            StepStats& s) override {
    const auto acc = w.momentum.accumulate(w.slot, g, &w.residual);  // a sparse selection with error feedback
    const int leader = shared_leader(w.step, w.index, comm.world_size());
    SharedOutcome r = shared_exchange(w.c, acc, w.tensor, leader, comm, out);
    return !record_reduced(w, this, ExchangeMode::shared, r.skipped, std::move(r.mine), r.info, r.wire_bytes, g.size(),
                           s);
  }
};

}  // namespace

std::unique_ptr<BucketExchange> make_shared_exchange() { return std::make_unique<SharedExchange>(); }

}  // namespace gs::compress::detail
