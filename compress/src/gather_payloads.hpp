#pragma once
// Internal: the all-gather of sparse payloads both of BucketCompressor's paths run (host buckets
// and device buckets): every worker's encoding, an empty one meaning that worker met NaN or Inf.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gs/compress/collectives.hpp"
#include "gs/compress/payload.hpp"
#include "gs/base/error.hpp"

namespace gs::compress::detail {

// Every worker's payload for a vector of n elements, decoded and checked (validate(): indices in
// range, before they address any memory), in rank order; nullopt when some worker sent none (the
// vector is skipped everywhere). gathered_bytes grows by what the all-gather carried for this
// worker: the longest encoding, which Gloo pads every one to. `what` names the vector in errors.
inline std::optional<std::vector<Payload>> gather_payloads(Collectives& comm, std::span<const std::byte> wire,
                                                           std::uint64_t n, const std::string& what,
                                                           std::uint64_t& gathered_bytes) {
  const auto all = comm.allgather(wire);
  std::uint64_t longest = 0;
  bool skip = false;
  for (const auto& part : all) {
    longest = std::max<std::uint64_t>(longest, part.size());
    skip = skip || part.empty();
  }
  gathered_bytes += longest;
  if (skip) return std::nullopt;
  std::vector<Payload> payloads;
  payloads.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    payloads.push_back(decode(all[r]));
    validate(payloads.back());
    if (payloads.back().n != n)
      throw Error("worker " + std::to_string(r) + " sent a payload of " + std::to_string(payloads.back().n) +
                  " elements for " + what + " of " + std::to_string(n) + " (do all workers run the same model?)");
  }
  return payloads;
}

}  // namespace gs::compress::detail
