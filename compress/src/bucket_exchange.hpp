#pragma once
// Internal: BucketCompressor's exchanges as strategies, one file each, chosen by name
// (make_bucket_exchange). An exchange turns one bucket's accumulator into the workers' mean update
// and says what the step's end must do to the residual (a PendingCommit); BucketCompressor keeps
// the residuals and the step's life: placement, the commits, checkpoints, statistics.
//   dense             (exchange_dense.cpp) one all-reduce of the whole vector: an uncompressed step
//                     (the residual and the velocity go with it) or a dense compressor's own payload
//   allgather         (exchange_allgather.cpp) every worker's sparse payload, all-gathered and summed:
//                     the default, and the one that runs where the bucket lies on a device
//   own-rounds        (exchange_own_rounds.cpp) a compressor's own collective rounds (PowerSGD)
//   shared            (exchange_shared.cpp) the values at a rotating leader's selection, all-reduced
//   sparse-allreduce  (exchange_sparse_allreduce.cpp) Ok-Topk's split, reduce, balance and
//                     all-gather; its regions per bucket layout are its state, in checkpoints
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "residual_slots.hpp"
#include "timed_collectives.hpp"

namespace gs::compress::detail {

class BucketExchange;

// A change of residual this step makes, applied at the step's end (or dropped with the step).
struct PendingCommit {
  std::string slot;
  Payload payload;                         // this worker's payload (the sparse and dense paths)
  std::vector<float> sent;                 // what this worker's contribution decoded to (own rounds)
  bool resident = false;                   // a device slot: its accumulator, sent entries zeroed, becomes e
  bool residual = true;                    // the slot's residual accumulated (error feedback)
  bool velocity = false;                   // the slot's velocity advanced too (momentum correction)
  bool all_sent = false;                   // everything of the accumulator went (an uncompressed step): e = 0
  bool device_skip = false;                // whether the step skips is known on the device only (StepLedger::step_skip)
  const Compressor* dense_with = nullptr;  // an uncompressed step's: everything sent, the velocity kept
  BucketExchange* by = nullptr;            // told of the commit (BucketExchange::committed)
  std::vector<std::uint64_t> bounds{};     // sparse-allreduce: the slot's next regions
};

// A finished step whose figures the device still writes (device collectives decide on the device):
// its statistics so far, its buckets' reports in host memory the device writes into, and a mark
// after them. It settles once the mark is done, never waiting in a bucket.
struct Unsettled {
  StepStats stats;
  std::int64_t step = 0;
  double step_norm = 0.0;
  std::vector<std::pair<const kernels::ExchangeReport*, std::uint64_t>> reports;  // and each bucket's n
  std::vector<std::shared_ptr<void>> pages;                                       // the reports' host memory
  std::unique_ptr<kernels::DeviceMark> mark;
};

// What a step leaves for later: the residual changes its end commits, the device's reports of its
// buckets, and the finished steps not settled yet.
struct StepLedger {
  static constexpr std::size_t kReportsPerPage = 16;
  // Steps left unsettled at most; past them the oldest is waited for (a synchronization).
  static constexpr std::size_t kMaxUnsettled = 4;
  std::vector<PendingCommit> pending;
  std::deque<Unsettled> unsettled;               // in step order
  std::string pending_error;                     // the skip rule's error from a step settled by an accessor
  std::uint64_t late_syncs = 0;                  // the hook's waits at a step's end, counted to the next step
  kernels::DeviceArray<std::int32_t> step_skip;  // set on the device by a bucket a worker skipped
  bool step_skip_clear = false;                  // cleared for the current step
  std::vector<std::pair<const kernels::ExchangeReport*, std::uint64_t>> reports;  // the current step's
  std::vector<std::shared_ptr<void>> pages, free_pages;  // the current step's report pages; spare ones

  // A report slot in host memory for the current step's bucket (pages of kReportsPerPage, reused
  // once their step settled).
  kernels::ExchangeReport* next_report(kernels::VectorOps& ops) {
    const std::size_t at = reports.size() % kReportsPerPage;
    if (at == 0) {
      if (free_pages.empty()) free_pages.push_back(ops.host_memory(kReportsPerPage * sizeof(kernels::ExchangeReport)));
      pages.push_back(std::move(free_pages.back()));
      free_pages.pop_back();
    }
    return static_cast<kernels::ExchangeReport*>(pages.back().get()) + at;
  }
};

// One bucket's exchange as BucketCompressor hands it over: the compressor that encodes it (the
// dense warm-up's "none", or the run's), the run's residuals and velocities, and where the step's
// commits go.
struct BucketWork {
  Compressor& c;
  Compressor& run;  // the run's compressor: its error feedback, its density
  ResidualMemory& residual;
  MomentumCorrection& momentum;
  StepLedger& ledger;
  std::int64_t step = 0;
  int index = 0;
  const std::string& slot;                // the bucket layout's residual slot
  const std::string& tensor;              // the compressor's name for the bucket (tensor_name)
  kernels::VectorOps* ops = nullptr;      // a device bucket's
  ResidentResiduals* resident = nullptr;  // its residuals, where they live on the device

  bool flush() const { return &c != &run; }  // an uncompressed step sends everything
  PendingCommit& commit(BucketExchange* by) {
    ledger.pending.push_back({});
    PendingCommit& p = ledger.pending.back();
    p.slot = slot;
    p.by = by;
    return p;
  }
};

// The compressor's name for a bucket. The variance compressor keeps per-element state under it:
// named after the layout, it follows the parameters as the residuals do (a regrouped layout starts
// afresh) instead of meeting another layout under the same bucket number.
inline std::string tensor_name(const Compressor& c, const std::string& slot, int index) {
  return c.needs_gradient_variance() ? slot : "bucket" + std::to_string(index);
}

class BucketExchange {
 public:
  virtual ~BucketExchange() = default;
  virtual std::string_view name() const = 0;
  // A bucket in host memory: out (g.size()) receives the mean update; true when the bucket is
  // skipped (a worker met NaN or Inf: nothing enters the residual).
  virtual bool host(BucketWork& w, std::span<const float> g, std::span<const float> variance, Collectives& comm,
                    std::span<float> out, StepStats& s) = 0;
  // A bucket on a device, left there (the exchanges that run there: dense, allgather).
  virtual bool device(BucketWork& w, const DeviceBucket& b, TimedCollectives& comm, DeviceCollectives* device_comm,
                      StepStats& s);
  // The step of a commit it made ends unskipped.
  virtual void committed(PendingCommit&) {}
  // What it carries from step to step, in checkpoints (the sparse all-reduce's regions).
  virtual void save_state(StateWriter&) const {}
  virtual void load_state(StateReader&) {}
};

// What the exchanges that reduce a selection over the workers (shared, sparse-allreduce) do with
// their outcome: the bucket's record, then either the step's change of residual and velocity
// dropped (skipped: a worker met NaN or Inf) or this worker's contribution committed at the
// step's end. The commit, or nullptr when skipped.
inline PendingCommit* record_reduced(BucketWork& w, BucketExchange* by, ExchangeMode mode, bool skipped, Payload&& mine,
                                     const CompressInfo& info, std::uint64_t wire_bytes, std::uint64_t n,
                                     StepStats& s) {
  s.exchange = std::uint8_t(mode);
  s.gathered_bytes += wire_bytes;
  if (skipped) {
    w.residual.discard(w.slot);
    if (w.momentum.on()) w.momentum.discard(w.slot);
    return nullptr;
  }
  s.n += n;
  s.bytes_sent += wire_bytes;
  count_group(s, info);
  PendingCommit& commit = w.commit(by);
  commit.payload = std::move(mine);
  commit.velocity = w.momentum.on();
  return &commit;
}

// An uncompressed step's bucket split around its all-reduce, which the dense exchange runs and
// gradscope.ddp's dense steps leave to DDP's own all-reduce (BucketCompressor::StockDense).
// flush_dense writes into `payload` what this worker sends: g with the residual and momentum
// correction's velocity (g and payload may be the same memory), and leaves the step's commit (the
// residual then 0, the velocity kept). finish_dense turns the workers' sum into their mean in place,
// with the bucket's figures; true when the sum is not finite (the bucket is skipped, and the skipped
// step drops the commit).
void flush_dense(BucketWork& w, std::span<const float> g, std::span<float> payload);
bool finish_dense(std::span<float> sum, int workers, StepStats& s);

// dense, allgather, own-rounds, shared or sparse-allreduce; gs::Error for another name.
std::unique_ptr<BucketExchange> make_bucket_exchange(std::string_view name);
// The strategy a step's bucket runs: uncompressed steps dense; shared and sparse-allreduce by the
// exchange in effect; else by the compressor's own kind of exchange.
std::string_view bucket_exchange_name(bool uncompressed, ExchangeMode mode, Exchange kind);

}  // namespace gs::compress::detail
