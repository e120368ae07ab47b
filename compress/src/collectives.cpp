// Collectives' default all-to-all, over allgather: each worker gathers every worker's parts (sizes
// first, then the bytes) and keeps those addressed to it.
#include "gs/compress/collectives.hpp"

#include <cstring>
#include <string>

#include "gs/base/error.hpp"

namespace gs::compress {

std::vector<std::vector<std::byte>> Collectives::allgather_known(std::span<const std::byte> mine,
                                                                 std::span<const std::uint64_t> sizes) {
  auto all = allgather(mine);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (r >= sizes.size() || all[r].size() != sizes[r])
      throw Error("all-gather: worker " + std::to_string(r) + " sent " + std::to_string(all[r].size()) +
                  " bytes where every worker expected " + (r < sizes.size() ? std::to_string(sizes[r]) : "none") +
                  " (do all workers call it alike?)");
  return all;
}

std::vector<std::vector<std::byte>> Collectives::alltoall(const std::vector<std::vector<std::byte>>& to_each) {
  const int w = world_size();
  if (int(to_each.size()) != w)
    throw Error("all-to-all: " + std::to_string(to_each.size()) + " parts for " + std::to_string(w) + " workers");
  // One buffer: the w part sizes (uint64), then the parts in rank order.
  std::size_t total = sizeof(std::uint64_t) * std::size_t(w);
  for (const auto& part : to_each) total += part.size();
  std::vector<std::byte> mine(total);
  std::size_t at = 0;
  for (const auto& part : to_each) {
    const std::uint64_t size = part.size();
    std::memcpy(mine.data() + at, &size, sizeof size);
    at += sizeof size;
  }
  for (const auto& part : to_each) {
    if (!part.empty()) std::memcpy(mine.data() + at, part.data(), part.size());
    at += part.size();
  }
  const auto all = allgather(mine);
  std::vector<std::vector<std::byte>> from(static_cast<std::size_t>(w));
  const int me = rank();
  for (int r = 0; r < w; ++r) {
    const auto& buf = all[std::size_t(r)];
    if (buf.size() < sizeof(std::uint64_t) * std::size_t(w))
      throw Error("all-to-all: worker " + std::to_string(r) + " sent a short buffer (do all workers call it alike?)");
    std::size_t offset = sizeof(std::uint64_t) * std::size_t(w), size = 0;
    for (int d = 0; d <= me; ++d) {
      std::uint64_t s = 0;
      std::memcpy(&s, buf.data() + sizeof s * std::size_t(d), sizeof s);
      if (d < me)
        offset += s;
      else
        size = s;
    }
    if (offset + size > buf.size())
      throw Error("all-to-all: worker " + std::to_string(r) + "'s part sizes exceed its buffer");
    from[std::size_t(r)].assign(buf.begin() + std::ptrdiff_t(offset), buf.begin() + std::ptrdiff_t(offset + size));
  }
  return from;
}

}  // namespace gs::compress
