#include "gs/compress/grouping.hpp"

#include <set>

#include "gs/base/enum_names.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {

constexpr EnumName<Granularity> kGranularities[] = {
    {Granularity::layer, "layer"}, {Granularity::model, "model"}, {Granularity::bucket, "bucket"}};

std::string_view to_string(Granularity g) { return enum_name(kGranularities, g); }

Granularity parse_granularity(std::string_view name) { return enum_value(kGranularities, name, "granularity"); }

std::vector<Group> make_groups(std::span<const TensorSpec> tensors, Granularity g, std::uint64_t bucket_size) {
  if (tensors.empty()) throw Error("granularity: the model has no tensors");
  std::set<std::string_view> names;
  std::uint64_t total = 0;
  for (const auto& t : tensors) {
    if (t.name.empty()) throw Error("granularity: a tensor has an empty name");
    if (!names.insert(t.name).second) throw Error("granularity: tensor name '" + t.name + "' repeats");
    if (t.numel == 0) throw Error("granularity: tensor '" + t.name + "' has no elements");
    total += t.numel;
  }
  std::vector<Group> groups;
  switch (g) {
    case Granularity::layer: {
      std::uint64_t at = 0;
      for (const auto& t : tensors) {
        groups.push_back({t.name, at, t.numel});
        at += t.numel;
      }
      break;
    }
    case Granularity::model:
      groups.push_back({"model", 0, total});
      break;
    case Granularity::bucket: {
      if (bucket_size == 0) throw Error("granularity: --bucket-size must be at least 1");
      for (std::uint64_t at = 0, i = 0; at < total; at += bucket_size, ++i)
        groups.push_back({"bucket" + std::to_string(i), at, std::min(bucket_size, total - at)});
      break;
    }
  }
  return groups;
}

}  // namespace gs::compress
