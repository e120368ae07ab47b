#include "gs/compress/bucket_compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/device.hpp"
#include "gather_payloads.hpp"
#include "host_vectors.hpp"
#include "residual_slots.hpp"
#include "shared_exchange.hpp"
#include "sparse_allreduce.hpp"
#include "timed_collectives.hpp"

namespace gs::compress {
namespace {

constexpr std::string_view kAdvice = "lower the learning rate or check the data";

using detail::any_nonfinite;
using detail::squared_norm;

}  // namespace

BucketCompressor::BucketCompressor(std::unique_ptr<Compressor> compressor, WarmupSchedule warmup,
                                   std::size_t history)
    : compressor_(std::move(compressor)), dense_(make_compressor("none", 1.0)),
      warmup_(warmup), history_limit_(std::max<std::size_t>(history, 1)),
      host_slots_(std::make_unique<detail::HostSlots>(residual_)),
      velocity_slots_(std::make_unique<detail::HostSlots>(momentum_.velocities())) {
  if (!compressor_) throw Error("bucket compressor: no compressor given");
  warmup_.density = compressor_->density();
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

std::string BucketCompressor::name_parameters(std::span<const BucketParam> params, std::uint64_t n,
                                              int index) {
  std::uint64_t total = 0;
  for (const BucketParam& p : params) total += p.numel;
  if (total != n)
    throw Error("bucket " + std::to_string(index) + ": " + std::to_string(n) +
                " elements for parameters of " + std::to_string(total));
  std::uint64_t next = placed_.size();  // the ordinal the next new parameter gets
  for (const BucketParam& p : params) {  // checked before anything is numbered
    const auto known = ordinal_.find(p.key);
    if (known != ordinal_.end() && placed_[known->second].numel != p.numel)
      throw Error("bucket " + std::to_string(index) + ": a parameter had " +
                  std::to_string(placed_[known->second].numel) + " elements and now has " +
                  std::to_string(p.numel));
    if (known == ordinal_.end()) {
      const std::uint64_t o = next++;
      for (const ByOrdinal* m : {&loaded_, &loaded_velocity_}) {
        const auto loaded = m->find(o);
        if (loaded != m->end() && loaded->second.size() != p.numel)
          throw Error("bucket " + std::to_string(index) + ": parameter #" + std::to_string(o) + " has " +
                      std::to_string(p.numel) + " elements; its " + (m == &loaded_ ? "residual" : "velocity") +
                      " in the loaded state has " + std::to_string(loaded->second.size()) +
                      " (a state of another model?)");
      }
    }
  }
  std::string layout;  // the ordinals, which name the layout's residual slot
  for (const BucketParam& p : params) {
    auto [it, fresh] = ordinal_.try_emplace(p.key, placed_.size());
    if (fresh) placed_.push_back({"", 0, p.numel});
    layout += std::to_string(it->second) + ",";
  }
  return layout;
}

std::string BucketCompressor::place(std::span<const BucketParam> params, std::uint64_t n, int index) {
  const std::string layout = name_parameters(params, n, index);
  if (!compressor_->error_feedback()) return layout;

  // Parameters whose residual (and velocity) lives elsewhere (another layout, the loaded state, or
  // nowhere yet: zeros) move into this layout's slot; a layout no parameter lives in any more is
  // dropped.
  std::set<std::string> left;
  place_in(slots(), loaded_, layout, params, n, left);
  if (momentum_.on()) place_in(*velocity_slots_, loaded_velocity_, layout, params, n, left);
  std::uint64_t at = 0;
  for (const BucketParam& p : params) {
    Placed& where = placed_[ordinal_.at(p.key)];
    where.layout = layout;
    where.offset = at;
    at += p.numel;
  }
  for (const std::string& old : left)
    if (std::none_of(placed_.begin(), placed_.end(), [&](const Placed& p) { return p.layout == old; })) {
      slots().erase(old);
      if (momentum_.on()) velocity_slots_->erase(old);
    }
  return layout;
}

void BucketCompressor::place_in(detail::ResidualSlots& store, ByOrdinal& loaded, const std::string& layout,
                                std::span<const BucketParam> params, std::uint64_t n, std::set<std::string>& left) {
  if (!store.contains(layout)) store.create(layout, n);
  std::uint64_t at = 0;
  for (const BucketParam& p : params) {
    const std::uint64_t o = ordinal_.at(p.key);
    const Placed& where = placed_[o];
    if (where.layout != layout) {
      if (!where.layout.empty()) {
        store.move(layout, at, where.layout, where.offset, p.numel);
        left.insert(where.layout);
      } else if (const auto it = loaded.find(o); it != loaded.end() && it->second.size() == p.numel) {
        store.write(layout, at, it->second);
        loaded.erase(it);
      } else {
        store.zero(layout, at, p.numel);
      }
    }
    at += p.numel;
  }
}

void BucketCompressor::begin_step() {
  if (regimes_.moves_density(warmup_)) compressor_->set_density(regimes_.density_at(warmup_, steps_));
  uncompressed_ = sends_dense(warmup_, steps_, compressor_->density(), density_based(compressor_->name())) ||
                  (!warmup_.warmup_at(steps_) && gate_.dense_at(steps_));
  current_ = StepStats{};
  reports_.clear();  // an abandoned step's, if any (its pages are written before the next step's)
  for (auto& page : pages_) free_pages_.push_back(std::move(page));
  pages_.clear();
  step_skip_clear_ = false;
  current_.dense = uncompressed_;
  current_.warmup = warmup_.warmup_at(steps_);
  current_.critical = regimes_.critical_at(warmup_, steps_);
  step_norm_ = 0.0;
  current_.target_density =
      uncompressed_ || compressor_->exchange() == Exchange::allreduce ? 1.0 : compressor_->density();
}

std::string BucketCompressor::tensor_name(const Compressor& c, const std::string& slot, int index) {
  // The variance compressor keeps per-element state under the tensor's name: name it after the
  // layout, so that it follows the parameters as the residuals do (a regrouped layout starts
  // afresh) instead of meeting another layout under the same bucket number.
  return c.needs_gradient_variance() ? slot : "bucket" + std::to_string(index);
}

void BucketCompressor::run_bucket(int index, std::uint64_t n, unsigned element_bytes, bool last,
                                  double hook_seconds, Collectives& comm,
                                  const std::function<bool(TimedCollectives&, StepStats&)>& body) {
  if (failed_) {
    // An earlier bucket of this step failed: the step is abandoned, its other buckets with it.
    if (last) abandon_step(true);
    throw Error("bucket " + std::to_string(index) + ": an earlier bucket of this step failed; the "
                "step is abandoned");
  }
  const bool first = buckets_in_step_++ == 0;
  try {
    // The steps before, if the device's reports of them are in by now; their skip rule may stop here.
    if (first) settle_front(unsettled_.size(), true);
    if (first && !pending_error_.empty()) throw Error(std::exchange(pending_error_, {}));
    if (element_bytes == 0 || element_bytes > 8)
      throw Error("bucket " + std::to_string(index) + ": an element of " + std::to_string(element_bytes) +
                  " bytes; give the size of the gradient's dtype (2, 4 or 8)");
    const auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    const std::uint64_t bus0 = kernels::bus_bytes(), syncs0 = kernels::host_syncs();
    const kernels::DeviceWork work0 = kernels::device_work();
    TimedCollectives timed(comm);
    if (first) {
      // Before any other collective of the step: the workers' settings, compress-when auto's
      // choice (both the same on every worker), then the step's plan.
      if (agree_pending_) {
        std::vector<Setting> settings = shared_;
        settings.push_back({"the state's finished steps", std::to_string(steps_)});
        settings.push_back({"the gradient's bytes per element", std::to_string(element_bytes)});
        // Once per process (a resumed run agrees again): out of the step's link bytes, so that
        // they resume to the bit.
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
    }
    StepStats& s = current_;
    s.host_syncs += std::exchange(late_syncs_, 0);  // the earlier steps' figures waited for here
    s.buckets += 1;
    s.hook_seconds += hook_seconds;
    if (body(timed, s)) s.skipped = true;
    else s.dense_bytes += n * element_bytes;  // what the bucket costs uncompressed, in its dtype
    if (last) agree_on_regime(timed);
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
  if (last) end_step();
}

void BucketCompressor::exchange(int index, std::span<const float> g, std::span<const BucketParam> params,
                                Collectives& comm, std::span<float> out, bool last,
                                std::span<const float> variance, double hook_seconds,
                                unsigned element_bytes) {
  run_bucket(index, g.size(), element_bytes, last, hook_seconds, comm,
             [&](TimedCollectives& timed, StepStats& s) {
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

bool BucketCompressor::exchange_host(int index, const std::string& slot, std::span<const float> g,
                                     std::span<const float> variance, Collectives& comm, std::span<float> out,
                                     StepStats& s) {
  const std::string tensor = tensor_name(*compressor_, slot, index);
  if (!uncompressed_ && compressor_->needs_gradient_variance() && variance.size() != g.size())
    throw Error("compressor '" + std::string(compressor_->name()) + "' weighs elements by their "
                "gradient variance: give it for every bucket (" + std::to_string(variance.size()) +
                " values for a bucket of " + std::to_string(g.size()) + ")");
  bool skipped = false;
  if (uncompressed_) {
    skipped = exchange_dense(*dense_, slot, g, comm, out, s);
  } else if (const ExchangeMode mode = exchange_now(comm.world_size());
             mode == ExchangeMode::shared || mode == ExchangeMode::sparse_allreduce) {
    skipped = exchange_reduced(mode, index, slot, tensor, g, comm, out, s);
  } else {
    switch (compressor_->exchange()) {
      case Exchange::allreduce: skipped = exchange_dense(*compressor_, slot, g, comm, out, s); break;
      case Exchange::allgather: skipped = exchange_sparse(slot, tensor, g, variance, comm, out, s); break;
      case Exchange::collective: skipped = exchange_collective(slot, tensor, g, comm, out, s); break;
    }
  }
  if (skipped) std::fill(out.begin(), out.end(), 0.0f);
  return skipped;
}

void BucketCompressor::abandon_step(bool last) {
  // Nothing of the step is kept: every residual stays as it was before it.
  for (const auto& c : pending_) {
    if (slots().contains(c.slot)) slots().discard(c.slot);
    if (c.velocity && velocity_slots_->contains(c.slot)) velocity_slots_->discard(c.slot);
  }
  pending_.clear();
  failed_ = !last;
  if (last) buckets_in_step_ = 0;
}

void BucketCompressor::defer_commit(const std::string& slot, Payload payload, std::vector<float> sent) {
  pending_.push_back({slot, std::move(payload), std::move(sent)});
}

bool BucketCompressor::exchange_dense(Compressor& c, const std::string& slot, std::span<const float> g,
                                      Collectives& comm, std::span<float> out, StepStats& s) {
  // An uncompressed step (c is dense_: the dense warm-up, density 1, compress-when auto) sends the
  // whole accumulator, the residual and momentum correction's velocity included, so that error
  // feedback loses nothing: the residual is then empty and the velocity goes on unmasked
  // (momentum SGD over the step). A dense compressor (the quantizers' all-reduce) keeps its own
  // error feedback.
  const bool flush = &c == dense_.get();
  const bool ef = flush ? compressor_->error_feedback() : c.error_feedback();
  const bool velocity = flush && momentum_.on();
  const auto u = velocity ? momentum_.advance(slot, g) : g;
  const auto acc = ef ? residual_.accumulate(slot, u) : u;
  Compressed mine = c.compress(acc, slot);
  // With error feedback the residual needs this worker's own payload after the sum: sum a copy.
  std::vector<float> summed;
  if (ef) summed = mine.payload.values;
  std::span<float> sum = ef ? std::span<float>(summed) : std::span<float>(mine.payload.values);
  comm.allreduce_sum(sum);
  // Every worker holds the same sum: one decision, no extra round.
  if (any_nonfinite(sum)) {
    if (ef) residual_.discard(slot);
    if (velocity) momentum_.discard(slot);
    return true;
  }
  const std::uint64_t wire_bytes = mine.payload.wire_bytes();
  if (ef || velocity) {
    Payload own = mine.payload;
    if (ef) mine.payload.values = std::move(summed);
    PendingCommit commit;
    commit.slot = slot;
    commit.payload = std::move(own);
    commit.residual = ef;
    commit.velocity = velocity;
    commit.dense_with = flush ? &c : nullptr;
    pending_.push_back(std::move(commit));
  }
  c.decode_sum(mine.payload, comm.world_size(), out);
  s.n += g.size();
  s.selected += mine.info.selected;
  s.bytes_sent += wire_bytes;
  s.gathered_bytes += wire_bytes;
  return false;
}

bool BucketCompressor::exchange_reduced(ExchangeMode mode, int index, const std::string& slot,
                                        const std::string& tensor, std::span<const float> g, Collectives& comm,
                                        std::span<float> out, StepStats& s) {
  const bool velocity = momentum_.on();
  const auto acc = momentum_.accumulate(slot, g, &residual_);  // a sparse selection with error feedback
  detail::SparseAllreduceOutcome r;
  if (mode == ExchangeMode::shared) {
    const int leader = detail::shared_leader(steps_, index, comm.world_size());
    detail::SharedOutcome shared = detail::shared_exchange(*compressor_, acc, tensor, leader, comm, out);
    r.skipped = shared.skipped;
    r.mine = std::move(shared.mine);
    r.info = shared.info;
    r.wire_bytes = shared.wire_bytes;
  } else {
    const auto bounds = detail::bounds_of(regions_, slot, g.size(), comm.world_size());
    r = detail::sparse_allreduce(*compressor_, acc, tensor, bounds, comm, out);
  }
  s.exchange = std::uint8_t(mode);
  s.gathered_bytes += r.wire_bytes;
  if (r.skipped) {
    residual_.discard(slot);
    if (velocity) momentum_.discard(slot);
    return true;
  }
  s.n += g.size();
  s.bytes_sent += r.wire_bytes;
  count_group(s, r.info);
  defer_commit(slot, std::move(r.mine), {});
  pending_.back().velocity = velocity;
  pending_.back().bounds = std::move(r.next_bounds);  // the sparse all-reduce's next regions
  return false;
}

bool BucketCompressor::exchange_sparse(const std::string& slot, const std::string& tensor,
                                       std::span<const float> g, std::span<const float> variance,
                                       Collectives& comm, std::span<float> out, StepStats& s) {
  Compressor& c = *compressor_;
  const bool ef = c.error_feedback();
  // The variance compressor refuses non-finite input rather than counting it (info.nonfinite, as
  // the others do): look first, and give it the step's variance only when it will compress.
  const bool weighs_variance = c.needs_gradient_variance();
  const bool bad_input = weighs_variance && any_nonfinite(g);
  const bool velocity = momentum_.on();  // error feedback on the velocity, not on g
  // What the selection reads first of acc (SIDCo's stage 1 on the host), taken by the pass that
  // writes acc: one read of the bucket fewer.
  StatsOnWrite first;
  const auto fields = bad_input ? std::nullopt : c.stats_on_write();
  if (fields) first.fields = *fields;
  const auto acc = momentum_.accumulate(slot, g, ef ? &residual_ : nullptr, fields ? &first : nullptr);
  Compressed mine;
  if (!bad_input) {
    if (weighs_variance) c.add_gradient_variance(tensor, variance);
    mine = first.taken ? c.compress_given(acc, tensor, *first.taken) : c.compress(acc, tensor);
  }
  std::vector<std::byte> wire;
  std::uint64_t wire_bytes = 0;
  if (!bad_input && mine.info.nonfinite == 0) wire = encode(mine.payload, wire_bytes);
  const auto payloads = detail::gather_payloads(comm, wire, g.size(), "bucket '" + tensor + "'", s.gathered_bytes);
  if (!payloads) {  // a worker met NaN or Inf
    if (ef) residual_.discard(slot);
    if (velocity) momentum_.discard(slot);
    return true;
  }
  c.aggregate(*payloads, out);
  s.n += g.size();
  s.bytes_sent += wire_bytes;
  count_group(s, mine.info);
  if (ef) {
    defer_commit(slot, std::move(mine.payload), {});
    pending_.back().velocity = velocity;
  }
  return false;
}

bool BucketCompressor::exchange_collective(const std::string& slot, const std::string& tensor,
                                           std::span<const float> g, Collectives& comm,
                                           std::span<float> out, StepStats& s) {
  Compressor& c = *compressor_;
  // The compressor's rounds cannot carry a flag: agree on skipping first, in one small round.
  std::int32_t flag = any_nonfinite(g) ? 1 : 0;
  comm.allreduce_sum(std::span<std::int32_t>(&flag, 1));
  if (flag > 0) return true;
  const bool ef = c.error_feedback();
  const auto acc = ef ? residual_.accumulate(slot, g) : g;
  std::vector<float> sent(g.size());
  const auto r = c.exchange(acc, tensor, comm, sent, out);
  if (ef) defer_commit(slot, {}, std::move(sent));
  s.n += g.size();
  s.bytes_sent += r.wire_bytes;
  s.gathered_bytes += r.wire_bytes;
  count_group(s, r.info);
  return false;
}

void BucketCompressor::end_step() {
  buckets_in_step_ = 0;
  // The residuals change only with the whole step: a step skipped on any bucket keeps them all
  // as they were, as gradscope train does (the user skips its optimizer step; nothing is lost).
  // With device collectives the device knows whether it skipped: the commit is decided there.
  for (auto& c : pending_) {
    if (!c.bounds.empty() && !current_.skipped) regions_[c.slot] = std::move(c.bounds);
    if (c.resident) {
      if (current_.skipped) resident_->discard(c.slot);
      else if (c.device_skip) resident_->commit_unless(c.slot, step_skip_.data());
      else resident_->commit(c.slot);
    } else if (!c.residual) {
    } else if (current_.skipped) residual_.discard(c.slot);
    else if (c.sent.empty()) residual_.commit(c.slot, c.payload, c.dense_with ? *c.dense_with : *compressor_);
    else residual_.commit_decoded(c.slot, c.sent);
    if (!c.velocity) continue;
    if (current_.skipped) momentum_.discard(c.slot);
    else if (c.dense_with) momentum_.keep(c.slot);
    else momentum_.commit(c.slot, c.payload, *compressor_);
  }
  pending_.clear();
  step_skip_clear_ = false;
  if (!uncompressed_) compressor_->end_step();
  Unsettled u;
  u.stats = std::exchange(current_, StepStats{});
  u.step = steps_++;
  u.step_norm = step_norm_;
  u.reports = std::exchange(reports_, {});
  u.pages = std::exchange(pages_, {});
  if (!u.reports.empty()) u.mark = ops_->mark();
  unsettled_.push_back(std::move(u));
  // The density schedule decides from this step before the next one: it waits for the device.
  settle_front(regimes_.on() ? 0 : kMaxUnsettled, true);
}

void BucketCompressor::settle_front(std::size_t keep, bool in_step) {
  while (!unsettled_.empty()) {
    Unsettled& u = unsettled_.front();
    const bool done = !u.mark || u.mark->done();
    if (!done && unsettled_.size() <= keep) return;
    if (!done) {
      const std::uint64_t s0 = kernels::host_syncs();
      u.mark->wait();
      if (in_step) late_syncs_ += kernels::host_syncs() - s0;
    }
    Unsettled front = std::move(u);
    unsettled_.pop_front();
    settle(front, in_step);
  }
}

void BucketCompressor::settle(Unsettled& u, bool throw_here) {
  StepStats& s = u.stats;
  for (const auto& [r, n] : u.reports) {  // what the device decided and wrote
    s.selected += r->sent;
    s.bytes_sent += 8 * r->sent;  // pairs as they are: 4-byte index, 4-byte value
    s.stages = std::max(s.stages, int(r->selection.stages));
    s.corrected += r->selection.corrected;
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
  for (auto& page : u.pages) free_pages_.push_back(std::move(page));
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
    pending_error_ = e.what();  // the next bucket fails with it, every worker alike
  }
}

void BucketCompressor::settle_all() const {
  // Settling completes what the steps already decided: const to the caller.
  const_cast<BucketCompressor*>(this)->settle_front(0, false);
}

kernels::ExchangeReport* BucketCompressor::next_report() {
  const std::size_t at = reports_.size() % kReportsPerPage;
  if (at == 0) {
    if (free_pages_.empty())
      free_pages_.push_back(ops_->host_memory(kReportsPerPage * sizeof(kernels::ExchangeReport)));
    pages_.push_back(std::move(free_pages_.back()));
    free_pages_.pop_back();
  }
  return static_cast<kernels::ExchangeReport*>(pages_.back().get()) + at;
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
