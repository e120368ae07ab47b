#pragma once
// Granularity: which vectors a compressor sees. A model is a list of tensors laid end to end in
// one flat buffer; groups are ranges of it: one per tensor (layer), one for everything (model), or
// consecutive chunks of about T elements (bucket; tensors may straddle buckets).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gs::compress {

enum class Granularity { layer, model, bucket };
std::string_view to_string(Granularity g);
// "layer", "model" or "bucket"; gs::Error otherwise.
Granularity parse_granularity(std::string_view name);

struct TensorSpec {
  std::string name;
  std::uint64_t numel = 0;
};

struct Group {
  std::string name;  // the tensor's name, "model", or "bucket<i>"
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// Groups covering [0, sum numel) in order, without gaps or overlap. bucket_size is used (and must be
// >= 1) only for bucket; the last bucket takes the remainder. gs::Error on an empty tensor list, an
// empty or repeated name, or a zero-size tensor.
std::vector<Group> make_groups(std::span<const TensorSpec> tensors, Granularity g, std::uint64_t bucket_size = 0);

}  // namespace gs::compress
