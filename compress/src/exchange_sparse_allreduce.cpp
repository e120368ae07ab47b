// The sparse all-reduce (bucket_exchange.hpp, sparse_allreduce.hpp): Ok-Topk's split, reduce,
// balance and all-gather. The regions of each bucket layout follow the selections it sees: a step
// that ends unskipped keeps the next ones, and checkpoints keep them all.
#include <utility>

#include "bucket_exchange.hpp"
#include "sparse_allreduce.hpp"

namespace gs::compress::detail {
namespace {

class SparseAllreduceExchange final : public BucketExchange {
 public:
  std::string_view name() const override { return "sparse-allreduce"; }

  bool host(BucketWork& w, std::span<const float> g, std::span<const float>, Collectives& comm, std::span<float> out,
            StepStats& s) override {
    const auto acc = w.momentum.accumulate(w.slot, g, &w.residual);  // a sparse selection with error feedback
    const auto bounds = bounds_of(regions_, w.slot, g.size(), comm.world_size());
    SparseAllreduceOutcome r = sparse_allreduce(w.c, acc, w.tensor, bounds, comm, out);
    PendingCommit* commit = record_reduced(w, this, ExchangeMode::sparse_allreduce, r.skipped, std::move(r.mine),
                                           r.info, r.wire_bytes, g.size(), s);
    if (commit) commit->bounds = std::move(r.next_bounds);  // the regions of the next step
    return !commit;
  }

  void committed(PendingCommit& c) override {
    if (!c.bounds.empty()) regions_[c.slot] = std::move(c.bounds);
  }
  void save_state(StateWriter& w) const override { save_regions(w, regions_); }
  void load_state(StateReader& r) override { regions_ = load_regions(r); }

 private:
  Regions regions_;  // per bucket layout
};

}  // namespace

std::unique_ptr<BucketExchange> make_sparse_allreduce_exchange() { return std::make_unique<SparseAllreduceExchange>(); }

}  // namespace gs::compress::detail
