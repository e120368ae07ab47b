// Each parameter's residual and velocity, followed from bucket layout to bucket layout
// (parameter_placement.hpp).
#include "parameter_placement.hpp"

#include <algorithm>

#include "gs/base/error.hpp"

namespace gs::compress::detail {

std::string ParameterPlacement::name(std::span<const BucketParam> params, std::uint64_t n, int index) {
  std::uint64_t total = 0;
  for (const BucketParam& p : params) total += p.numel;
  if (total != n)
    throw Error("bucket " + std::to_string(index) + ": " + std::to_string(n) + " elements for parameters of " +
                std::to_string(total));
  std::uint64_t next = placed_.size();   // the ordinal the next new parameter gets
  for (const BucketParam& p : params) {  // checked before anything is numbered
    const auto known = ordinal_.find(p.key);
    if (known != ordinal_.end() && placed_[known->second].numel != p.numel)
      throw Error("bucket " + std::to_string(index) + ": a parameter had " +
                  std::to_string(placed_[known->second].numel) + " elements and now has " + std::to_string(p.numel));
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

std::string ParameterPlacement::place(std::span<const BucketParam> params, std::uint64_t n, int index,
                                      ResidualSlots& residuals, ResidualSlots* velocities) {
  const std::string layout = name(params, n, index);
  std::set<std::string> left;
  place_in(residuals, loaded_, layout, params, n, left);
  if (velocities) place_in(*velocities, loaded_velocity_, layout, params, n, left);
  std::uint64_t at = 0;
  for (const BucketParam& p : params) {
    Placed& where = placed_[ordinal_.at(p.key)];
    where.layout = layout;
    where.offset = at;
    at += p.numel;
  }
  for (const std::string& old : left)
    if (std::none_of(placed_.begin(), placed_.end(), [&](const Placed& p) { return p.layout == old; })) {
      residuals.erase(old);
      if (velocities) velocities->erase(old);
    }
  return layout;
}

void ParameterPlacement::place_in(ResidualSlots& store, ByOrdinal& loaded, const std::string& layout,
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

bool ParameterPlacement::any_placed() const {
  return std::any_of(placed_.begin(), placed_.end(), [](const Placed& p) { return !p.layout.empty(); });
}

ParameterPlacement::ByOrdinal ParameterPlacement::by_ordinal(const ResidualSlots& store,
                                                             const ByOrdinal& loaded) const {
  ByOrdinal out;
  for (std::uint64_t o = 0; o < placed_.size(); ++o)
    if (!placed_[o].layout.empty()) out[o] = store.read(placed_[o].layout, placed_[o].offset, placed_[o].numel);
  for (const auto& [o, e] : loaded) out.emplace(o, e);
  return out;
}

ParameterPlacement::ByOrdinal ParameterPlacement::read(StateReader& r, std::string_view what) const {
  ByOrdinal loaded;
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    const auto o = r.get<std::uint64_t>();
    loaded[o] = r.get_array<float>();
  }
  // Parameters this process has already seen keep their ordinals (the same as the saver's: both
  // numbered them in the order DDP first handed them over).
  for (const auto& [o, e] : loaded)
    if (o < placed_.size() && placed_[o].numel != e.size())
      r.fail("the " + std::string(what) + " of parameter #" + std::to_string(o) + " has " + std::to_string(e.size()) +
             " elements, this model's parameter " + std::to_string(placed_[o].numel));
  return loaded;
}

void ParameterPlacement::reload(ByOrdinal residuals, ByOrdinal velocities) {
  for (auto& p : placed_) p.layout.clear();
  loaded_ = std::move(residuals);
  loaded_velocity_ = std::move(velocities);
}

}  // namespace gs::compress::detail
