#include "gs/compress/residual.hpp"

#include <algorithm>

#include "gs/base/error.hpp"
#include "write_stats.hpp"

namespace gs::compress {

ResidualMemory::Slot& ResidualMemory::slot(std::string_view name) {
  auto it = slots_.find(name);
  if (it == slots_.end()) it = slots_.emplace(std::string(name), Slot{}).first;
  return it->second;
}

const ResidualMemory::Slot& ResidualMemory::slot(std::string_view name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) throw Error("residual memory: no vector named '" + std::string(name) + "'");
  return it->second;
}

ResidualMemory::Accumulation ResidualMemory::begin_accumulate(std::string_view name, std::size_t n) {
  Slot& s = slot(name);
  if (s.e.empty()) s.e.assign(n, 0.0f);
  if (s.e.size() != n)
    throw Error("residual memory: '" + std::string(name) + "' had " + std::to_string(s.e.size()) + " elements, now " +
                std::to_string(n));
  s.acc.resize(n);
  s.pending = true;
  return {s.e, s.acc};
}

std::span<const float> ResidualMemory::accumulate(std::string_view name, std::span<const float> g, float decay,
                                                  StatsOnWrite* stats) {
  const Accumulation a = begin_accumulate(name, g.size());
  detail::write_taking(a.acc, stats, [&](std::size_t begin, std::size_t end) {
    const float* __restrict e = a.e.data();
    const float* __restrict gi = g.data();
    float* __restrict acc = a.acc.data();
    if (decay == 1.0f) {
      for (std::size_t i = begin; i < end; ++i) acc[i] = gi[i] + e[i];
    } else {
      for (std::size_t i = begin; i < end; ++i) acc[i] = decay * e[i] + gi[i];
    }
  });
  return a.acc;
}

void ResidualMemory::commit(std::string_view name, const Payload& p, const Compressor& c) {
  Slot& s = slot(name);
  if (!s.pending) throw Error("residual memory: commit('" + std::string(name) + "') without accumulate()");
  if (p.n != s.acc.size())
    throw Error("residual memory: payload for '" + std::string(name) + "' has n = " + std::to_string(p.n) +
                ", the vector has " + std::to_string(s.acc.size()));
  if (p.kind == PayloadKind::sparse) {
    s.e.swap(s.acc);                                              // e = acc ...
    for (std::int32_t i : p.indices) s.e[std::size_t(i)] = 0.0f;  // ... with what was sent zeroed
  } else {
    std::vector<float> decoded(p.n);
    c.decompress(p, decoded);
    for (std::size_t i = 0; i < decoded.size(); ++i) s.e[i] = s.acc[i] - decoded[i];
  }
  s.pending = false;
}

void ResidualMemory::commit_all(std::string_view name) {
  Slot& s = slot(name);
  if (!s.pending) throw Error("residual memory: commit_all('" + std::string(name) + "') without accumulate()");
  std::fill(s.e.begin(), s.e.end(), 0.0f);
  s.pending = false;
}

void ResidualMemory::keep(std::string_view name) {
  Slot& s = slot(name);
  if (!s.pending) throw Error("residual memory: keep('" + std::string(name) + "') without accumulate()");
  s.e.swap(s.acc);
  s.pending = false;
}

void ResidualMemory::commit_decoded(std::string_view name, std::span<const float> sent) {
  Slot& s = slot(name);
  if (!s.pending) throw Error("residual memory: commit('" + std::string(name) + "') without accumulate()");
  if (sent.size() != s.acc.size())
    throw Error("residual memory: decoded contribution for '" + std::string(name) + "' has " +
                std::to_string(sent.size()) + " elements, the vector " + std::to_string(s.acc.size()));
  for (std::size_t i = 0; i < sent.size(); ++i) s.e[i] = s.acc[i] - sent[i];
  s.pending = false;
}

void ResidualMemory::save_state(StateWriter& w) const {
  w.put<std::uint64_t>(slots_.size());
  for (const auto& [name, s] : slots_) {
    if (s.pending) throw Error("residual memory: '" + name + "' is mid-step; save between steps");
    w.put_text(name);
    w.put_array<float>(s.e);
  }
}

void ResidualMemory::load_state(StateReader& r) {
  slots_.clear();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    std::string name = r.get_text();
    slots_[std::move(name)].e = r.get_array<float>();
  }
}

void ResidualMemory::discard(std::string_view name) { slot(name).pending = false; }

void ResidualMemory::assign(std::string_view name, std::vector<float> e) {
  Slot& s = slot(name);
  s.e = std::move(e);
  s.pending = false;
}

std::span<float> ResidualMemory::residual_for_update(std::string_view name) {
  Slot& s = slot(name);
  if (s.pending) throw Error("residual memory: '" + std::string(name) + "' is mid-step; update it between steps");
  return s.e;
}

void ResidualMemory::erase(std::string_view name) {
  const auto it = slots_.find(name);
  if (it != slots_.end()) slots_.erase(it);
}

bool ResidualMemory::contains(std::string_view name) const { return slots_.count(name) != 0; }

std::span<const float> ResidualMemory::residual(std::string_view name) const { return slot(name).e; }

std::span<const float> ResidualMemory::accumulator(std::string_view name) const { return slot(name).acc; }

}  // namespace gs::compress
