#include "gs/compress/model_compressor.hpp"

#include <algorithm>
#include <cmath>

#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"
#include "shared_exchange.hpp"
#include "sparse_allreduce.hpp"
#include "timed_collectives.hpp"

namespace gs::compress {

ModelCompressor::ModelCompressor(std::vector<TensorSpec> tensors, Granularity granularity, std::uint64_t bucket_size,
                                 std::unique_ptr<Compressor> compressor)
    : groups_(make_groups(tensors, granularity, bucket_size)), compressor_(std::move(compressor)) {
  if (!compressor_) throw Error("model compressor: no compressor given");
  for (const auto& g : groups_) numel_ += g.size;
  if (compressor_->exchange() == Exchange::allgather && numel_ > std::uint64_t(INT32_MAX))
    throw Error("model compressor: " + std::to_string(numel_) +
                " elements exceed the int32 index space of sparse payloads");
}

void ModelCompressor::set_gradient_variance(std::span<const float> flat_v) {
  if (!compressor_->needs_gradient_variance())
    throw Error("model compressor: '" + std::string(compressor_->name()) + "' does not use gradient variances");
  if (flat_v.size() != numel_)
    throw Error("model compressor: gradient variance has " + std::to_string(flat_v.size()) + " elements, the model " +
                std::to_string(numel_));
  variance_.assign(flat_v.begin(), flat_v.end());
}

void ModelCompressor::feed_variance(const Group& g) {
  if (!compressor_->needs_gradient_variance()) return;
  if (variance_.size() != numel_)
    throw Error("model compressor: '" + std::string(compressor_->name()) +
                "' needs the gradient variance of every step (set_gradient_variance)");
  compressor_->add_gradient_variance(g.name, std::span<const float>(variance_).subspan(g.offset, g.size));
}

void ModelCompressor::save_state(StateWriter& w) const {
  w.put(numel_);
  w.put<std::uint64_t>(groups_.size());
  w.put(momentum_.momentum());
  momentum_.velocities().save_state(w);
  residual_.save_state(w);
  compressor_->save_state(w);
  if (detail::keeps_regions(exchange_)) detail::save_regions(w, regions_);  // per group
}

void ModelCompressor::load_state(StateReader& r) {
  r.expect(r.get<std::uint64_t>(), numel_, "the model's parameter count");
  r.expect(r.get<std::uint64_t>(), std::uint64_t(groups_.size()), "the number of compressed groups");
  r.expect(r.get<double>(), momentum_.momentum(), "the momentum correction");
  ResidualMemory velocities, residual;
  velocities.load_state(r);
  residual.load_state(r);
  for (const auto* m : {&velocities, &residual}) {
    std::size_t known = 0;
    for (const Group& g : groups_) known += m->contains(g.name);
    if (known != m->size()) r.fail("the residual memory names vectors this model does not have");
    for (const Group& g : groups_)
      if (m->contains(g.name) && m->residual(g.name).size() != g.size)
        r.fail("the residual or velocity of '" + g.name + "' has the wrong size");
  }
  compressor_->load_state(r);
  detail::Regions regions;
  if (detail::keeps_regions(exchange_)) regions = detail::load_regions(r);
  for (const auto& region : regions) {  // (a named binding: clang 14 does not capture structured ones)
    const std::string& name = region.first;
    const auto group = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.name == name; });
    if (group == groups_.end() || region.second.back() != group->size)
      r.fail("holds sparse all-reduce regions of '" + name + "', which this model has not, or of another size");
  }
  momentum_.velocities() = std::move(velocities);
  residual_ = std::move(residual);
  regions_ = std::move(regions);
}

void ModelCompressor::set_momentum_correction(double momentum) {
  momentum_ = MomentumCorrection(momentum, *compressor_, "model compressor: momentum correction");
}

std::span<const float> ModelCompressor::accumulate(const Group& g, std::span<const float> flat) {
  return momentum_.accumulate(g.name, flat.subspan(g.offset, g.size),
                              compressor_->error_feedback() ? &residual_ : nullptr);
}

void ModelCompressor::set_exchange(ExchangeMode mode) {
  if (mode == ExchangeMode::shared || mode == ExchangeMode::sparse_allreduce)
    check_shared_exchange(compressor_->name(), "--exchange " + std::string(to_string(mode)));
  exchange_ = mode;
}

void ModelCompressor::step(std::span<const float> flat, Collectives& comm, std::span<float> out, StepStats* stats,
                           StepPlan plan) {
  if (flat.size() != numel_ || out.size() != numel_)
    throw Error("model compressor: gradient has " + std::to_string(flat.size()) + " elements and the update " +
                std::to_string(out.size()) + ", the model " + std::to_string(numel_));
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  TimedCollectives timed(comm);
  StepStats s;
  const ExchangeMode mode = plan.dense ? ExchangeMode::allgather
                                       : resolve_exchange(exchange_, comm.world_size(), compressor_->density(),
                                                          exchanges_sparse_selection(compressor_->name()));
  if (plan.dense)
    step_dense(flat, timed, out, s);
  else if (mode == ExchangeMode::shared)
    step_shared(flat, plan.step, timed, out, s);
  else if (mode == ExchangeMode::sparse_allreduce)
    step_sparse_allreduce(flat, timed, out, s);
  else
    switch (compressor_->exchange()) {
      case Exchange::collective:
        step_collective(flat, timed, out, s);
        break;
      case Exchange::allgather: {
        const Payload mine = compress(flat, &s);
        const auto bytes = encode(mine);
        const auto all = timed.allgather(bytes);
        std::vector<Payload> payloads;
        payloads.reserve(all.size());
        for (std::size_t r = 0; r < all.size(); ++r) {
          payloads.push_back(decode(all[r]));
          if (payloads.back().n != numel_)
            throw Error("model compressor: worker " + std::to_string(r) + " sent a payload for another model size");
        }
        aggregate(payloads, out);
        break;
      }
      case Exchange::allreduce: {
        Payload sum = compress(flat, &s);
        timed.allreduce_sum(std::span<float>(sum.values));
        decode_sum(sum, comm.world_size(), out);
        break;
      }
    }
  s.exchange = std::uint8_t(mode);
  s.comm_seconds = timed.seconds;
  s.link_bytes = std::uint64_t(std::llround(timed.link_bytes));
  s.compress_seconds = seconds_since(t0) - timed.seconds;
  s.compress_cpu_seconds = thread_cpu_seconds() - cpu0 - timed.cpu_seconds;
  if (stats) *stats = std::move(s);
}

void ModelCompressor::step_dense(std::span<const float> flat, Collectives& comm, std::span<float> out, StepStats& s) {
  s = StepStats{};
  s.n = s.selected = numel_;
  s.dense_bytes = s.bytes_sent = numel_ * 4;
  s.dense = true;
  const bool ef = compressor_->error_feedback();
  std::vector<float> sum(numel_);
  for (const Group& g : groups_) {
    auto u = flat.subspan(g.offset, g.size);
    if (momentum_.on()) u = momentum_.advance(g.name, u);
    const auto acc = ef ? residual_.accumulate(g.name, u) : u;
    std::copy(acc.begin(), acc.end(), sum.begin() + std::ptrdiff_t(g.offset));
  }
  comm.allreduce_sum(std::span<float>(sum));
  const float inv = 1.0f / float(comm.world_size());
  for (std::size_t i = 0; i < numel_; ++i) out[i] = sum[i] * inv;
  for (const Group& g : groups_) {  // everything went: the residual empties, the velocity goes on
    if (ef) residual_.commit_decoded(g.name, residual_.accumulator(g.name));
    if (momentum_.on()) momentum_.keep(g.name);
  }
}

void ModelCompressor::step_shared(std::span<const float> flat, std::int64_t step, Collectives& comm,
                                  std::span<float> out, StepStats& s) {
  s = StepStats{};
  s.n = numel_;
  s.target_density = compressor_->density();
  s.dense_bytes = numel_ * 4;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    const auto acc = accumulate(g, flat);
    const int leader = detail::shared_leader(step, int(gi), comm.world_size());
    detail::SharedOutcome r =
        detail::shared_exchange(*compressor_, acc, g.name, leader, comm, out.subspan(g.offset, g.size));
    if (r.skipped) throw Error("model compressor: a worker's accumulator of '" + g.name + "' holds NaN or Inf");
    residual_.commit(g.name, r.mine, *compressor_);
    if (momentum_.on()) momentum_.commit(g.name, r.mine, *compressor_);
    s.bytes_sent += r.wire_bytes;
    s.gathered_bytes += r.wire_bytes;
    count_group(s, r.info);
  }
  compressor_->end_step();
}

void ModelCompressor::step_sparse_allreduce(std::span<const float> flat, Collectives& comm, std::span<float> out,
                                            StepStats& s) {
  s = StepStats{};
  s.n = numel_;
  s.target_density = compressor_->density();
  s.dense_bytes = numel_ * 4;
  detail::Regions next;
  for (const Group& g : groups_) {
    const auto acc = accumulate(g, flat);
    const auto bounds = detail::bounds_of(regions_, g.name, g.size, comm.world_size());
    detail::SparseAllreduceOutcome r =
        detail::sparse_allreduce(*compressor_, acc, g.name, bounds, comm, out.subspan(g.offset, g.size));
    if (r.skipped) throw Error("model compressor: a worker's accumulator of '" + g.name + "' holds NaN or Inf");
    residual_.commit(g.name, r.mine, *compressor_);
    if (momentum_.on()) momentum_.commit(g.name, r.mine, *compressor_);
    next[g.name] = std::move(r.next_bounds);
    s.bytes_sent += r.wire_bytes;
    s.gathered_bytes += r.wire_bytes;
    count_group(s, r.info);
  }
  regions_ = std::move(next);
  compressor_->end_step();
}

void ModelCompressor::step_collective(std::span<const float> flat, Collectives& comm, std::span<float> out,
                                      StepStats& s) {
  s = StepStats{};
  s.n = numel_;
  s.target_density = compressor_->density();
  s.dense_bytes = numel_ * 4;
  std::vector<float> sent;
  for (const Group& g : groups_) {
    feed_variance(g);
    const auto acc = accumulate(g, flat);
    sent.resize(g.size);
    const auto r = compressor_->exchange(acc, g.name, comm, sent, out.subspan(g.offset, g.size));
    if (compressor_->error_feedback()) residual_.commit_decoded(g.name, sent);
    s.bytes_sent += r.wire_bytes;
    count_group(s, r.info);
  }
  compressor_->end_step();
  variance_.clear();
}

Payload ModelCompressor::compress(std::span<const float> flat, StepStats* stats) {
  if (flat.size() != numel_)
    throw Error("model compressor: gradient has " + std::to_string(flat.size()) + " elements, the model " +
                std::to_string(numel_));
  if (compressor_->exchange() == Exchange::collective)
    throw Error("model compressor: '" + std::string(compressor_->name()) +
                "' runs its own exchange protocol: use step() with the workers' collectives");
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  Payload out;
  out.n = numel_;
  const bool dense = compressor_->exchange() == Exchange::allreduce;
  out.kind = dense ? PayloadKind::dense : PayloadKind::sparse;
  if (dense) out.values.reserve(numel_);
  StepStats s;
  s.n = numel_;
  s.target_density = dense ? 1.0 : compressor_->density();
  s.dense_bytes = numel_ * 4;
  for (const Group& g : groups_) {
    feed_variance(g);
    const auto acc = accumulate(g, flat);
    Compressed c = compressor_->compress(acc, g.name);
    if (c.payload.n != g.size || c.payload.kind != out.kind)
      throw Error("model compressor: '" + std::string(compressor_->name()) +
                  "' returned a payload of the wrong size or kind");
    if (compressor_->error_feedback()) residual_.commit(g.name, c.payload, *compressor_);
    if (momentum_.on()) momentum_.commit(g.name, c.payload, *compressor_);
    if (dense) {
      out.values.insert(out.values.end(), c.payload.values.begin(), c.payload.values.end());
      out.scale = c.payload.scale;
      out.code_bits = c.payload.code_bits;
    } else {
      for (std::size_t j = 0; j < c.payload.count(); ++j) {
        out.indices.push_back(std::int32_t(g.offset + std::uint64_t(c.payload.indices[j])));
        out.values.push_back(c.payload.values[j]);
      }
    }
    count_group(s, c.info);
  }
  compressor_->end_step();
  variance_.clear();
  s.bytes_sent = out.wire_bytes();
  s.compress_seconds = seconds_since(t0);
  s.compress_cpu_seconds = thread_cpu_seconds() - cpu0;
  if (stats) *stats = std::move(s);
  return out;
}

void ModelCompressor::aggregate(std::span<const Payload> payloads, std::span<float> out) const {
  if (out.size() != numel_) throw Error("model compressor: output size differs from the model's");
  compressor_->aggregate(payloads, out);
}

void ModelCompressor::decode_sum(const Payload& summed, int workers, std::span<float> out) const {
  if (out.size() != numel_) throw Error("model compressor: output size differs from the model's");
  compressor_->decode_sum(summed, workers, out);
}

std::vector<float> ModelCompressor::flat_residual() const {
  std::vector<float> r(numel_, 0.0f);
  for (const Group& g : groups_)
    if (residual_.contains(g.name)) {
      auto e = residual_.residual(g.name);
      std::copy(e.begin(), e.end(), r.begin() + std::ptrdiff_t(g.offset));
    }
  return r;
}

}  // namespace gs::compress
