#include "gs/compress/bucket_compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/device.hpp"
#include "bucket_exchange.hpp"
#include "host_vectors.hpp"
#include "parameter_placement.hpp"
#include "residual_slots.hpp"
#include "timed_collectives.hpp"

namespace gs::compress {
namespace {

constexpr std::string_view kAdvice = "lower the learning rate or check the data";

using detail::squared_norm;

}  // namespace

BucketCompressor::BucketCompressor(std::unique_ptr<Compressor> compressor, WarmupSchedule warmup, std::size_t history)
    : compressor_(std::move(compressor)),
      dense_(make_compressor("none", 1.0)),
      warmup_(warmup),
      history_limit_(std::max<std::size_t>(history, 1)),
      host_slots_(std::make_unique<detail::HostSlots>(residual_)),
      placement_(std::make_unique<detail::ParameterPlacement>()),
      velocity_slots_(std::make_unique<detail::HostSlots>(momentum_.velocities())),
      ledger_(std::make_unique<detail::StepLedger>()) {
  if (!compressor_) throw Error("bucket compressor: no compressor given");
  warmup_.density = compressor_->density();
  for (std::string_view name : {"dense", "allgather", "own-rounds", "shared", "sparse-allreduce"})
    exchanges_.emplace(name, detail::make_bucket_exchange(name));
}

void BucketCompressor::set_density_schedule(const DensitySchedule& schedule, const DensitySchedule::Names& names) {
  if (steps_ > 0 || mid_step()) throw Error("bucket compressor: set the density schedule before the first step");
  schedule.check(density_based(compressor_->name()), compressor_->name(), warmup_.density, names);
  regimes_ = RegimeDetector(schedule);
}

void BucketCompressor::set_momentum_correction(double momentum, std::string_view setting) {
  if (steps_ > 0 || mid_step()) throw Error("bucket compressor: set the momentum correction before the first step");
  momentum_ = MomentumCorrection(momentum, *compressor_, setting);
}

void BucketCompressor::set_compress_when(CompressionGate::When when, std::int64_t interval) {
  if (steps_ > 0 || mid_step()) throw Error("bucket compressor: set compress-when before the first step");
  gate_ = CompressionGate(when, interval);
}

void BucketCompressor::set_exchange(ExchangeMode mode) {
  if (steps_ > 0 || mid_step()) throw Error("bucket compressor: set the exchange before the first step");
  if (mode == ExchangeMode::shared || mode == ExchangeMode::sparse_allreduce)
    check_shared_exchange(compressor_->name(), "exchange " + std::string(to_string(mode)));
  exchange_ = mode;
}

ExchangeMode BucketCompressor::exchange_now(int workers) const {
  return resolve_exchange(exchange_, workers, compressor_->density(), exchanges_sparse_selection(compressor_->name()));
}

void BucketCompressor::set_shared_settings(std::vector<Setting> settings, std::string advice) {
  shared_ = std::move(settings);
  shared_advice_ = std::move(advice);
  agree_pending_ = true;
}

BucketCompressor::~BucketCompressor() = default;

detail::ResidualSlots& BucketCompressor::slots() {
  if (resident_) return *resident_;
  return *host_slots_;
}

std::string BucketCompressor::name_parameters(std::span<const BucketParam> params, std::uint64_t n, int index) {
  return placement_->name(params, n, index);
}

std::string BucketCompressor::place(std::span<const BucketParam> params, std::uint64_t n, int index) {
  if (!compressor_->error_feedback()) return placement_->name(params, n, index);
  return placement_->place(params, n, index, slots(), momentum_.on() ? velocity_slots_.get() : nullptr);
}

void BucketCompressor::fail_bucket(bool last) {
  ++buckets_in_step_;
  abandon_step(last);
}

bool BucketCompressor::last_step_skipped() const {
  settle_all();
  return !history_.empty() && history_.back().skipped;
}

const std::deque<StepStats>& BucketCompressor::history() const {
  settle_all();
  return history_;
}

std::string BucketCompressor::take_warning() {
  settle_all();
  return std::exchange(warning_, {});
}

RunSummary BucketCompressor::summary() const {
  settle_all();
  return statistics_.summary();
}

void BucketCompressor::begin_step() {
  if (regimes_.moves_density(warmup_)) compressor_->set_density(regimes_.density_at(warmup_, steps_));
  uncompressed_ = sends_dense(warmup_, steps_, compressor_->density(), density_based(compressor_->name())) ||
                  (!warmup_.warmup_at(steps_) && gate_.dense_at(steps_));
  current_ = StepStats{};
  detail::StepLedger& l = *ledger_;
  l.reports.clear();  // an abandoned step's, if any (its pages are written before the next step's)
  for (auto& page : l.pages) l.free_pages.push_back(std::move(page));
  l.pages.clear();
  l.step_skip_clear = false;
  current_.dense = uncompressed_;
  current_.warmup = warmup_.warmup_at(steps_);
  current_.critical = regimes_.critical_at(warmup_, steps_);
  step_norm_ = 0.0;
  current_.target_density =
      uncompressed_ || compressor_->exchange() == Exchange::allreduce ? 1.0 : compressor_->density();
}

void BucketCompressor::open_step(TimedCollectives& timed, unsigned element_bytes) {
  // Before any other collective of the step: the workers' settings, compress-when auto's choice
  // (both the same on every worker), then the step's plan.
  if (agree_pending_) {
    std::vector<Setting> settings = shared_;
    settings.push_back({"the state's finished steps", std::to_string(steps_)});
    settings.push_back({"the gradient's bytes per element", std::to_string(element_bytes)});
    // Once per process (a resumed run agrees again): out of the step's link bytes, so that they
    // resume to the bit.
    const double link_before = timed.link_bytes;
    agree_settings(timed, settings, shared_advice_);
    timed.link_bytes = link_before;
    agree_pending_ = false;
  }
  if (!refusal_.empty()) throw Error(refusal_);
  if (gate_.choice_due()) {
    std::vector<float> times = gate_.times();
    timed.allreduce_max(std::span<float>(times));
    gate_.choose(steps_, times);
  }
  begin_step();
  step_open_ = true;
}

void BucketCompressor::run_bucket(int index, std::uint64_t n, unsigned element_bytes, bool last, double hook_seconds,
                                  Collectives& comm, const std::function<bool(TimedCollectives&, StepStats&)>& body,
                                  Part part) {
  if (failed_) {
    // An earlier bucket of this step failed: the step is abandoned, its other buckets with it.
    if (last) abandon_step(true);
    throw Error("bucket " + std::to_string(index) +
                ": an earlier bucket of this step failed; the "
                "step is abandoned");
  }
  const bool first = !step_open_;
  if (part != Part::finish) ++buckets_in_step_;
  const bool closes = last && part != Part::prepare;
  try {
    // The steps before, if the device's reports of them are in by now; their skip rule may stop here.
    if (first) settle_front(ledger_->unsettled.size(), true);
    if (first && !ledger_->pending_error.empty()) throw Error(std::exchange(ledger_->pending_error, {}));
    if (element_bytes == 0 || element_bytes > 8)
      throw Error("bucket " + std::to_string(index) + ": an element of " + std::to_string(element_bytes) +
                  " bytes; give the size of the gradient's dtype (2, 4 or 8)");
    const auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    const std::uint64_t bus0 = kernels::bus_bytes(), syncs0 = kernels::host_syncs();
    const kernels::DeviceWork work0 = kernels::device_work();
    TimedCollectives timed(comm);
    if (first) open_step(timed, element_bytes);
    StepStats& s = current_;
    if (part != Part::finish) {
      s.host_syncs += std::exchange(ledger_->late_syncs, 0);  // the earlier steps' figures waited for here
      s.buckets += 1;
      s.hook_seconds += hook_seconds;
    }
    if (body(timed, s))
      s.skipped = true;
    else if (part != Part::prepare)
      s.dense_bytes += n * element_bytes;  // uncompressed, in its dtype
    if (closes) agree_on_regime(timed);
    s.host_device_bytes += kernels::bus_bytes() - bus0;
    s.host_syncs += kernels::host_syncs() - syncs0;
    const kernels::DeviceWork work = kernels::device_work() - work0;
    s.launches += work.launches;
    s.single_thread_launches += work.single_thread_launches;
    s.allocations += work.allocations;
    s.events_created += work.events_created;
    s.scratch_queries += work.scratch_queries;
    s.elements_passed += work.elements_passed;
    s.comm_seconds += timed.seconds;
    s.link_bytes += std::uint64_t(std::llround(timed.link_bytes));
    s.compress_seconds += seconds_since(t0) - timed.seconds;
    s.compress_cpu_seconds += thread_cpu_seconds() - cpu0 - timed.cpu_seconds;
  } catch (...) {
    abandon_step(last);
    throw;
  }
  if (closes) end_step();
}

void BucketCompressor::exchange(int index, std::span<const float> g, std::span<const BucketParam> params,
                                Collectives& comm, std::span<float> out, bool last, std::span<const float> variance,
                                double hook_seconds, unsigned element_bytes) {
  run_bucket(index, g.size(), element_bytes, last, hook_seconds, comm, [&](TimedCollectives& timed, StepStats& s) {
    if (out.size() != g.size())
      throw Error("bucket " + std::to_string(index) + ": the update has " + std::to_string(out.size()) +
                  " elements, the gradient " + std::to_string(g.size()));
    if (resident_)
      throw Error("bucket " + std::to_string(index) + ": this state keeps its residuals on device " +
                  std::to_string(ops_->device()) + "; give it that device's buckets (one state per device)");
    const std::string slot = place(params, g.size(), index);
    if (regimes_.on()) step_norm_ += squared_norm(g);
    return exchange_host(index, slot, g, variance, timed, out, s);
  });
}

detail::BucketExchange& BucketCompressor::strategy(std::string_view name) const {
  return *exchanges_.find(name)->second;
}

detail::BucketWork BucketCompressor::work(int index, const std::string& slot, const std::string& tensor) {
  return {uncompressed_ ? *dense_ : *compressor_,
          *compressor_,
          residual_,
          momentum_,
          *ledger_,
          steps_,
          index,
          slot,
          tensor,
          ops_.get(),
          resident_.get()};
}

bool BucketCompressor::exchange_host(int index, const std::string& slot, std::span<const float> g,
                                     std::span<const float> variance, Collectives& comm, std::span<float> out,
                                     StepStats& s) {
  const std::string tensor = detail::tensor_name(*compressor_, slot, index);
  if (!uncompressed_ && compressor_->needs_gradient_variance() && variance.size() != g.size())
    throw Error("compressor '" + std::string(compressor_->name()) +
                "' weighs elements by their "
                "gradient variance: give it for every bucket (" +
                std::to_string(variance.size()) + " values for a bucket of " + std::to_string(g.size()) + ")");
  const std::string_view name =
      detail::bucket_exchange_name(uncompressed_, exchange_now(comm.world_size()), compressor_->exchange());
  detail::BucketWork w = work(index, slot, tensor);
  const bool skipped = strategy(name).host(w, g, variance, comm, out, s);
  if (skipped) std::fill(out.begin(), out.end(), 0.0f);
  return skipped;
}

void BucketCompressor::abandon_step(bool last) {
  // Nothing of the step is kept: every residual stays as it was before it.
  for (const auto& c : ledger_->pending) {
    if (slots().contains(c.slot)) slots().discard(c.slot);
    if (c.velocity && velocity_slots_->contains(c.slot)) velocity_slots_->discard(c.slot);
  }
  ledger_->pending.clear();
  failed_ = !last;
  if (last) {
    buckets_in_step_ = 0;
    step_open_ = false;
  }
}

void BucketCompressor::end_step() {
  buckets_in_step_ = 0;
  step_open_ = false;
  // The residuals change only with the whole step: a step skipped on any bucket keeps them all
  // as they were, as gradscope train does (the user skips its optimizer step; nothing is lost).
  // With device collectives the device knows whether it skipped: the commit is decided there.
  detail::StepLedger& l = *ledger_;
  for (auto& c : l.pending) {
    if (c.by && !current_.skipped) c.by->committed(c);
    if (c.resident) {
      if (current_.skipped)
        resident_->discard(c.slot);
      else if (c.device_skip)
        resident_->commit_unless(c.slot, l.step_skip.data());
      else
        resident_->commit(c.slot);
    } else if (!c.residual) {
    } else if (current_.skipped)
      residual_.discard(c.slot);
    else if (c.all_sent)
      residual_.commit_all(c.slot);
    else if (c.sent.empty())
      residual_.commit(c.slot, c.payload, c.dense_with ? *c.dense_with : *compressor_);
    else
      residual_.commit_decoded(c.slot, c.sent);
    if (!c.velocity) continue;
    if (current_.skipped)
      momentum_.discard(c.slot);
    else if (c.dense_with)
      momentum_.keep(c.slot);
    else
      momentum_.commit(c.slot, c.payload, *compressor_);
  }
  l.pending.clear();
  l.step_skip_clear = false;
  if (!uncompressed_) compressor_->end_step();
  detail::Unsettled u;
  u.stats = std::exchange(current_, StepStats{});
  u.step = steps_++;
  u.step_norm = step_norm_;
  u.reports = std::exchange(l.reports, {});
  u.pages = std::exchange(l.pages, {});
  if (!u.reports.empty()) u.mark = ops_->mark();
  l.unsettled.push_back(std::move(u));
  // The density schedule decides from this step before the next one: it waits for the device.
  settle_front(regimes_.on() ? 0 : detail::StepLedger::kMaxUnsettled, true);
}

void BucketCompressor::settle_front(std::size_t keep, bool in_step) {
  std::deque<detail::Unsettled>& unsettled = ledger_->unsettled;
  while (!unsettled.empty()) {
    detail::Unsettled& u = unsettled.front();
    const bool done = !u.mark || u.mark->done();
    if (!done && unsettled.size() <= keep) return;
    if (!done) {
      const std::uint64_t s0 = kernels::host_syncs();
      u.mark->wait();
      if (in_step) ledger_->late_syncs += kernels::host_syncs() - s0;
    }
    detail::Unsettled front = std::move(u);
    unsettled.pop_front();
    settle(front, in_step);
  }
}

void BucketCompressor::settle(detail::Unsettled& u, bool throw_here) {
  StepStats& s = u.stats;
  for (const auto& [r, n] : u.reports) {  // what the device decided and wrote
    s.selected += r->sent;
    s.bytes_sent += 8 * r->sent;  // pairs as they are: 4-byte index, 4-byte value
    s.stages = std::max(s.stages, int(r->selection.stages));
    s.corrected += r->selection.corrected != 0 ? 1 : 0;
    s.exact += r->selection.exact;
    if (!std::isnan(r->selection.estimate)) {
      s.estimate_n += n;
      s.estimate_selected += r->selection.estimate_count;
    }
    s.group_quality.push_back(n && s.target_density > 0 ? double(r->sent) / double(n) / s.target_density : 0.0);
    s.overflow += r->overflow;
    s.skipped = s.skipped || r->skipped;
    s.host_device_bytes += sizeof(kernels::ExchangeReport);  // written across the bus by the device
  }
  for (auto& page : u.pages) ledger_->free_pages.push_back(std::move(page));
  // compress-when auto times the step it settles (its buckets take the host path: settled at once).
  if (!s.skipped) gate_.add(u.step, s.dense, s.compress_seconds + s.comm_seconds);
  regimes_.add(s.skipped, u.step_norm);
  if (regimes_.due(u.step)) regimes_.decide(regime_sum_);
  statistics_.add(s);
  if (!s.skipped && !s.warmup && s.target_density < 1.0) {
    std::string w = density_watch_.add(s.quality());
    if (!w.empty()) warning_ = std::move(w);
  }
  const bool skipped = s.skipped;
  history_.push_back(std::move(s));
  if (history_.size() > history_limit_) history_.pop_front();
  try {
    skip_.record(skipped, u.step, kAdvice);
  } catch (const Error& e) {
    if (throw_here) throw;
    ledger_->pending_error = e.what();  // the next bucket fails with it, every worker alike
  }
}

void BucketCompressor::settle_all() const {
  // Settling completes what the steps already decided: const to the caller.
  const_cast<BucketCompressor*>(this)->settle_front(0, false);
}

void BucketCompressor::agree_on_regime(Collectives& comm) {
  if (!regimes_.due(steps_)) return;
  // The interval's squared norms, this step's included (a skipped step counts none), summed
  // over the workers: every worker gets the same sum and takes the same decision at end_step.
  float sum = float(regimes_.interval_sum() + (current_.skipped ? 0.0 : step_norm_));
  comm.allreduce_sum(std::span<float>(&sum, 1));
  regime_sum_ = sum;
}

}  // namespace gs::compress
