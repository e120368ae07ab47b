#pragma once
// BucketCompressor: one worker's compressed exchange of a model's gradient handed over bucket by
// bucket, over collectives the framework supplies: the C++ side of the PyTorch DDP communication
// hook (gradscope.ddp), which only adds torch.distributed collectives and Futures. Per bucket it
// does what ModelCompressor::step does per group (error feedback, compression, exchange,
// decoding); per step it applies the rules `gradscope train` applies (gs/compress/step_rules.hpp:
// warm-up, Accordion's density schedule, skipping non-finite steps, statistics; gs/compress/
// momentum.hpp: momentum correction). Everything that carries from one step to the next lives
// here and checkpoints with save_state().
//
// Residuals (and momentum correction's velocities) are kept per parameter, named by keys the
// framework chooses (Python's id()): each follows its parameter when DDP regroups the buckets, and
// checkpoints keep them in the order the parameters were first seen. Each bucket's exchange is a
// strategy of its own (docs/architecture.md).
//
// Skipping: a worker whose bucket holds NaN or Inf says so in the exchange; then every worker gets
// zeros for that bucket, nothing enters its residual, and the step counts as skipped.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gs/compress/agreement.hpp"
#include "gs/compress/collectives.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/momentum.hpp"
#include "gs/compress/residual.hpp"
#include "gs/compress/step_rules.hpp"
#include "gs/kernels/vector_ops.hpp"

namespace gs::compress {

class TimedCollectives;
namespace detail {
class ResidualSlots;
class ResidentResiduals;
class BucketExchange;
class ParameterPlacement;
struct BucketWork;
struct StepLedger;
struct Unsettled;
}  // namespace detail

struct BucketParam {
  std::uint64_t key = 0;    // the framework's name for the parameter, stable within a process
  std::uint64_t numel = 0;  // its elements in the bucket
};

// A bucket in a backend's device memory (a CUDA tensor for backend cuda; for cuda-host, host
// memory declared memory of a fake device): its n float32 gradients, overwritten with the update.
struct DeviceBucket {
  int index = 0;
  float* data = nullptr;
  std::uint64_t n = 0;
  kernels::BackendKind backend = kernels::BackendKind::cuda;
  int device = 0;
  unsigned element_bytes = 4;  // of the gradient's own dtype (2: float16), as exchange()'s
};

class BucketCompressor {
 public:
  // history: how many finished steps' StepStats history() keeps (the summary covers every step).
  BucketCompressor(std::unique_ptr<Compressor> compressor, WarmupSchedule warmup, std::size_t history = 1000);
  ~BucketCompressor();

  const Compressor& compressor() const { return *compressor_; }
  const WarmupSchedule& warmup() const { return warmup_; }

  // Accordion's density after the warm-up (step_rules.hpp), before the first step. At the last
  // bucket of each check step one all-reduce of one float sums the workers' squared gradient
  // norms, so every worker decides alike. gs::Error for a schedule DensitySchedule::check refuses.
  void set_density_schedule(const DensitySchedule& schedule, const DensitySchedule::Names& names);
  const RegimeDetector& regimes() const { return regimes_; }
  // The settings every worker must share, as the front end names them (Python's keywords), and
  // what to do about a difference. Compared across the workers (agree_settings), with the step
  // count and the first bucket's element size, at the first bucket after construction or
  // load_state(), before any other collective: workers with other settings all stop, with one
  // line naming the setting and both values, instead of hanging in mismatched collectives.
  void set_shared_settings(std::vector<Setting> settings, std::string advice);
  // Every step from now on fails with gs::Error(why) at its first bucket, right after the
  // settings' agreement: a setting the front end refuses (Python's momentum correction beside an
  // optimizer's momentum) stops every worker alike, none left waiting in a collective.
  void refuse_steps(std::string why) { refusal_ = std::move(why); }
  // compress-when auto (CompressionGate, step_rules.hpp): a step sends dense while dense is the
  // faster exchange, and the gate looks at the other mode from time to time. Before the first step.
  void set_compress_when(CompressionGate::When when, std::int64_t interval);
  const CompressionGate& gate() const { return gate_; }
  // The exchange of a sparse, error-fed compressor's selections (ExchangeMode; gs::Error for
  // another compressor), before the first step. shared: the values at a rotating leader's
  // selection, all-reduced; sparse-allreduce: each worker sums a region of the indices (regions
  // kept in checkpoints) and the largest sums are all-gathered; both on the host. auto: per step,
  // the one resolve_exchange() names (a compressor without a sparse selection keeps its own).
  void set_exchange(ExchangeMode mode);
  ExchangeMode exchange_mode() const { return exchange_; }
  // The exchange a compressed step of this density runs among `workers`.
  ExchangeMode exchange_now(int workers) const;
  void set_shared_exchange(bool shared) { set_exchange(shared ? ExchangeMode::shared : ExchangeMode::allgather); }
  bool shared_exchange() const { return exchange_ == ExchangeMode::shared; }
  // Momentum correction (momentum.hpp), before the first step: a velocity per parameter, which
  // follows it from bucket to bucket and checkpoints as the residuals do. A device bucket then
  // goes through the host path (the velocity lives in host memory; the update is copied back).
  // gs::Error as MomentumCorrection's constructor; `setting` names it in the caller's words.
  void set_momentum_correction(double momentum, std::string_view setting);
  double momentum_correction() const { return momentum_.momentum(); }

  // One bucket of the current step. g: the bucket's gradient, the parameters' gradients laid end
  // to end in `params` order; out (g.size()) receives the mean update over the workers (zeros when
  // the bucket is skipped). variance: for compressors that needs_gradient_variance(), the bucket's
  // per-element sum of squared per-sample gradients / B^2 (empty otherwise). hook_seconds: the
  // time the framework's hook call took, counted to the step. element_bytes: the size of an
  // element in the gradient's own dtype (2 for float16, 8 for float64; g holds it as float32):
  // StepStats::dense_bytes counts that dtype, bytes_sent what travels. last: the step's last
  // bucket, which closes the step: the compressor's end_step, the statistics, and the skip rule
  // (gs::Error at the tenth skipped step in a row). Every worker calls it for the same buckets in
  // the same order.
  void exchange(int index, std::span<const float> g, std::span<const BucketParam> params, Collectives& comm,
                std::span<float> out, bool last, std::span<const float> variance = {}, double hook_seconds = 0.0,
                unsigned element_bytes = 4);

  // The same for a bucket on a device, left there; the calling thread is bound to its device for
  // good (VectorOps::bind_thread: rank r's hook thread works on GPU r). A compressor that selects
  // on that backend (resident_backend() == b.backend: topk, the threshold methods, sidco-topk)
  // keeps the residuals there and selects there; across the bus go this worker's pairs to the host
  // (all-gathered through `comm`) and the others' back, or with `device_comm` (NCCL) nothing but
  // counts. Every worker's pairs are added on the device in rank order and scaled by 1/workers, as
  // Compressor::aggregate does: the same update to the bit. A dense step all-reduces the bucket
  // with device_comm, else through the host; a compressor without a resident backend gets the
  // bucket on the host and its update back. StepStats::host_device_bytes counts what crosses.
  // One BucketCompressor serves one device.
  void exchange_resident(const DeviceBucket& b, std::span<const BucketParam> params, Collectives& comm,
                         DeviceCollectives* device_comm, bool last, std::span<const float> variance = {},
                         double hook_seconds = 0.0);

  // Numbers the parameters of a bucket not seen yet, in `params` order, as handing the bucket over
  // would, and checks their sizes (n: the bucket's elements); returns the layout's name: for a
  // framework that regroups a step's buckets (gradscope.ddp after a resume).
  std::string name_parameters(std::span<const BucketParam> params, std::uint64_t n, int index);

  std::int64_t steps() const { return steps_; }  // finished steps
  bool mid_step() const { return buckets_in_step_ > 0 || step_open_; }
  // A bucket the framework could not hand over (its own error before exchange()): the step is
  // abandoned as if exchange() had failed on it.
  void fail_bucket(bool last);
  // Whether the last finished step was skipped (skip its optimizer step). With device collectives
  // the device decides it: this and the statistics below wait for the device's reports of the last
  // step where they are not in yet (the one place the host waits for that step).
  bool last_step_skipped() const;
  const std::deque<StepStats>& history() const;
  // The density watch's warning (DensityWatch), once, after the step that raised it; taking it clears it.
  std::string take_warning();
  RunSummary summary() const;

  // Checkpoints, between steps: the step count (the warm-up's position), the compressor's own
  // state (stage controller, random streams), every parameter's residual and velocity, the skip
  // count, the run's statistics and the density schedule's detector. load_state() into a
  // BucketCompressor made with the same compressor, options, warm-up, schedule and momentum
  // correction continues exactly; gs::Error (through r) naming what differs.
  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  void begin_step();
  void end_step();
  // At the last bucket of a check step of the density schedule: the interval's sum of squared
  // norms over the workers, into regime_sum_ (one all-reduce of one float).
  void agree_on_regime(Collectives& comm);
  // One bucket's bookkeeping around `body` (true: the bucket was skipped): the step's begin and
  // end, a failed bucket abandoning it, the times, bus bytes and dense bytes (n of element_bytes).
  // Part: a whole bucket, or a dense step's bucket before the framework's all-reduce (never closes
  // the step) and after it (neither counts the bucket again nor opens the step; StockDense).
  enum class Part : std::uint8_t { whole, prepare, finish };
  void run_bucket(int index, std::uint64_t n, unsigned element_bytes, bool last, double hook_seconds, Collectives& comm,
                  const std::function<bool(TimedCollectives&, StepStats&)>& body, Part part = Part::whole);
  // A step's start, at its first bucket: settings agreed, compress-when's choice, begin_step.
  void open_step(TimedCollectives& timed, unsigned element_bytes);
  friend struct StockDense;  // gs/compress/stock_dense.hpp
  // The exchange strategy of this name (bucket_exchange.hpp), and what it is handed for a bucket.
  detail::BucketExchange& strategy(std::string_view name) const;
  detail::BucketWork work(int index, const std::string& slot, const std::string& tensor);
  bool exchange_host(int index, const std::string& slot, std::span<const float> g, std::span<const float> variance,
                     Collectives& comm, std::span<float> out, StepStats& s);
  bool exchange_on_device(const DeviceBucket& b, std::span<const BucketParam> params, TimedCollectives& comm,
                          DeviceCollectives* device_comm, std::span<const float> variance, StepStats& s);
  // The step's figures from its device reports, into the rules they feed; throw_here: the skip
  // rule's error is thrown, else kept for the next bucket (a settle from an accessor).
  void settle(detail::Unsettled& u, bool throw_here);
  // Settles the unsettled steps in order: those whose mark is done, and (waiting) the oldest while
  // more than `keep` remain. in_step: the waits are the hook's (counted to the next step).
  void settle_front(std::size_t keep, bool in_step);
  // Every unsettled step settled (waiting for their marks): what the accessors read first.
  void settle_all() const;
  // Whether the compressor selects in `backend`'s memory (sparse, error-fed, resident there).
  bool selects_on(kernels::BackendKind backend, int workers) const;
  detail::ResidualSlots& slots();
  const detail::ResidualSlots& slots() const { return const_cast<BucketCompressor*>(this)->slots(); }
  // After an error: the step's residual changes are dropped and, unless `last` closed it, its
  // remaining buckets are refused until the last one.
  void abandon_step(bool last);
  void load_rest(StateReader& r, std::int64_t steps, bool with_gate, bool with_waits);
  // The bucket layout's residual slot (and velocity slot), filled (parameter_placement.hpp).
  std::string place(std::span<const BucketParam> params, std::uint64_t n, int index);

  std::unique_ptr<Compressor> compressor_;
  std::unique_ptr<Compressor> dense_;  // "none": the dense warm-up's exchange
  WarmupSchedule warmup_;
  std::size_t history_limit_;

  ResidualMemory residual_;                                // one slot per bucket layout (host buckets)
  std::unique_ptr<detail::ResidualSlots> host_slots_;      // residual_ as place() moves slots
  std::unique_ptr<kernels::VectorOps> ops_;                // the device of the device buckets
  std::unique_ptr<detail::ResidentResiduals> resident_;    // their residuals, on that device
  std::unique_ptr<detail::ParameterPlacement> placement_;  // each parameter's residual and velocity
  MomentumCorrection momentum_;                            // off unless set
  std::unique_ptr<detail::ResidualSlots> velocity_slots_;  // momentum_'s velocities as place() moves slots
  RegimeDetector regimes_;                                 // the density schedule (constant unless set)
  double step_norm_ = 0.0;                                 // this step's squared gradient norm, this worker
  float regime_sum_ = 0.0f;                                // agree_on_regime's sum over the workers
  std::vector<Setting> shared_;                            // set_shared_settings'
  std::string shared_advice_ = "make every worker's compressor with the same settings";
  bool agree_pending_ = true;                        // compare them at the next step's first bucket
  CompressionGate gate_;                             // compress-when (always unless set)
  ExchangeMode exchange_ = ExchangeMode::allgather;  // set_exchange's
  std::map<std::string, std::unique_ptr<detail::BucketExchange>, std::less<>> exchanges_;  // by name
  std::string refusal_;                                                                    // refuse_steps'
  std::unique_ptr<detail::StepLedger> ledger_;  // commits, device reports, unsettled steps

  std::int64_t steps_ = 0;
  int buckets_in_step_ = 0;
  bool step_open_ = false;     // open_step() ran, the step's end not yet
  bool failed_ = false;        // a bucket of this step failed: the rest wait for the last one
  bool uncompressed_ = false;  // this step is a dense warm-up step
  StepStats current_;
  std::deque<StepStats> history_;
  SkipRule skip_;
  RunStatistics statistics_;
  DensityWatch density_watch_;
  std::string warning_;  // take_warning()'s
};

}  // namespace gs::compress
