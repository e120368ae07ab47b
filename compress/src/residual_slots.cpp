#include "residual_slots.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "gs/base/error.hpp"

namespace gs::compress::detail {

void HostSlots::move(const std::string& dst, std::uint64_t at, const std::string& src, std::uint64_t from,
                     std::uint64_t count) {
  const auto s = m_.residual(src).subspan(from, count);
  std::copy(s.begin(), s.end(), m_.residual_for_update(dst).subspan(at, count).begin());
}

void HostSlots::write(const std::string& dst, std::uint64_t at, std::span<const float> values) {
  std::copy(values.begin(), values.end(), m_.residual_for_update(dst).subspan(at, values.size()).begin());
}

void HostSlots::zero(const std::string& dst, std::uint64_t at, std::uint64_t count) {
  const auto d = m_.residual_for_update(dst).subspan(at, count);
  std::fill(d.begin(), d.end(), 0.0f);
}

std::vector<float> HostSlots::read(const std::string& slot, std::uint64_t at, std::uint64_t count) const {
  const auto s = m_.residual(slot).subspan(at, count);
  return {s.begin(), s.end()};
}

ResidentResiduals::Slot& ResidentResiduals::at(const std::string& slot) {
  const auto it = slots_.find(slot);
  if (it == slots_.end()) throw Error("device residuals: no slot '" + slot + "'");
  return it->second;
}
const ResidentResiduals::Slot& ResidentResiduals::at(const std::string& slot) const {
  return const_cast<ResidentResiduals*>(this)->at(slot);
}

float* ResidentResiduals::residual_at(const std::string& slot, std::uint64_t from, std::uint64_t count) {
  Slot& s = at(slot);
  if (s.pending) throw Error("device residuals: '" + slot + "' is mid-step; update it between steps");
  if (from + count > s.e.size())
    throw Error("device residuals: elements [" + std::to_string(from) + ", " + std::to_string(from + count) +
                ") of a slot of " + std::to_string(s.e.size()));
  return s.e.data() + from;
}

void ResidentResiduals::create(const std::string& slot, std::uint64_t n) {
  Slot s;
  s.e = ops_.floats(n);
  ops_.fill(s.e.data(), 0.0f, n);
  slots_[slot] = std::move(s);
}

void ResidentResiduals::move(const std::string& dst, std::uint64_t at, const std::string& src, std::uint64_t from,
                             std::uint64_t count) {
  const float* s = residual_at(src, from, count);
  ops_.copy(residual_at(dst, at, count), s, count);
}

void ResidentResiduals::write(const std::string& dst, std::uint64_t at, std::span<const float> values) {
  ops_.upload(residual_at(dst, at, values.size()), values.data(), values.size_bytes());
}

void ResidentResiduals::zero(const std::string& dst, std::uint64_t at, std::uint64_t count) {
  ops_.fill(residual_at(dst, at, count), 0.0f, count);
}

std::vector<float> ResidentResiduals::read(const std::string& slot, std::uint64_t at, std::uint64_t count) const {
  std::vector<float> v(count);
  auto* self = const_cast<ResidentResiduals*>(this);  // a download changes nothing of the slots
  ops_.download(v.data(), self->residual_at(slot, at, count), count * sizeof(float));
  return v;
}

ResidentResiduals::Slot& ResidentResiduals::pending_slot(const std::string& slot, std::uint64_t n) {
  Slot& s = at(slot);
  if (s.e.size() != n)
    throw Error("device residuals: '" + slot + "' had " + std::to_string(s.e.size()) + " elements, now " +
                std::to_string(n));
  if (s.acc.size() != n) s.acc = ops_.floats(n);
  s.pending = true;
  return s;
}

const float* ResidentResiduals::accumulate(const std::string& slot, const float* g, std::uint64_t n) {
  Slot& s = pending_slot(slot, n);
  ops_.add(g, s.e.data(), s.acc.data(), n);
  return s.acc.data();
}

const float* ResidentResiduals::accumulate_clearing(const std::string& slot, float* g, std::uint64_t n,
                                                    std::int32_t* flag) {
  Slot& s = pending_slot(slot, n);
  ops_.add_and_clear(g, s.e.data(), s.acc.data(), n, flag);
  return s.acc.data();
}

void ResidentResiduals::zero_sent_and_report(const std::string& slot, const std::int32_t* send_idx,
                                             std::uint64_t capacity, const std::int32_t* skip,
                                             const kernels::SelectionReport* report, kernels::ExchangeReport* host) {
  Slot& s = at(slot);
  if (!s.pending) throw Error("device residuals: zero_sent('" + slot + "') without accumulate()");
  ops_.zero_sent_and_report(s.acc.data(), send_idx, capacity, skip, report, host);
}

void ResidentResiduals::zero_sent(const std::string& slot, const std::int32_t* idx, std::uint64_t k) {
  Slot& s = at(slot);
  if (!s.pending) throw Error("device residuals: zero_sent('" + slot + "') without accumulate()");
  if (k > 0) ops_.zero_at(s.acc.data(), idx, k);
}

void ResidentResiduals::commit_unless(const std::string& slot, const std::int32_t* skip) {
  commit(slot);
  Slot& s = at(slot);  // acc holds the residual as it was: back into e where the step skipped
  ops_.restore_if(s.e.data(), s.acc.data(), s.e.size(), skip);
}

void ResidentResiduals::commit(const std::string& slot) {
  Slot& s = at(slot);
  if (!s.pending) throw Error("device residuals: commit('" + slot + "') without accumulate()");
  std::swap(s.e, s.acc);
  s.pending = false;
}

template <class T>
void ResidentResiduals::grow(kernels::DeviceArray<T>& a, std::uint64_t n) {
  if (a.size() >= n) return;
  if constexpr (std::is_same_v<T, float>)
    a = ops_.floats(n);
  else
    a = ops_.ints(n);
}

ResidentResiduals::Room& ResidentResiduals::gather_room(const std::string& slot, std::uint64_t capacity,
                                                        std::uint64_t workers) {
  Room& r = at(slot).room;
  grow(r.send_idx, capacity + 1);
  grow(r.send_val, capacity + 1);
  grow(r.idx_all, (capacity + 1) * workers);
  grow(r.val_all, (capacity + 1) * workers);
  grow(r.skip, 1);
  return r;
}

ResidentResiduals::Room& ResidentResiduals::upload_room(const std::string& slot, std::uint64_t most,
                                                        std::uint64_t usual) {
  Room& r = at(slot).room;
  const std::uint64_t room = std::max<std::uint64_t>({most, usual, 1});
  grow(r.up_idx, room);
  grow(r.up_val, room);
  return r;
}

}  // namespace gs::compress::detail
