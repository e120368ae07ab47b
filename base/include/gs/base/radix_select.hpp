#pragma once
// Radix selection of the c-th largest among non-negative floats: the bit pattern of a non-negative
// float orders as its value, so one pass histograms the top 12 bits, a second collects the bucket
// that holds the answer (split by its next 12 bits when crowded), and only that is partially
// sorted. For the small in-memory sets
// (a sample, a list of candidates) that sidco-topk picks from; kernels/ has the pass over whole
// vectors (cpu::kth_largest).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace gs {

struct RadixPick {
  float value = 0.0f;         // the c-th largest
  std::uint64_t greater = 0;  // values strictly greater than it
};

// for_each(f) must call f(x) once per value x (>= 0, finite), in the same order both times it is
// called. Requires 1 <= c <= the number of values. scratch: reused between calls.
template <class ForEach>
RadixPick radix_largest(ForEach&& for_each, std::uint64_t c, std::vector<float>& scratch) {
  auto bits_of = [](float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits;
  };
  // The bucket of `counts` that holds the c-th largest; `above` grows by the values above it.
  std::array<std::uint64_t, 4096> counts;
  auto pick_bucket = [&](std::uint64_t& above) {
    std::uint32_t b = 4096;
    while (b > 0 && above + counts[b - 1] < c) above += counts[--b];
    return b - 1;
  };
  counts.fill(0);
  for_each([&](float x) { ++counts[bits_of(x) >> 19]; });  // the top 12 bits (the sign bit is 0)
  std::uint64_t above = 0;
  const std::uint32_t top = pick_bucket(above);
  scratch.clear();
  for_each([&](float x) {
    if ((bits_of(x) >> 19) == top) scratch.push_back(x);
  });
  // A crowded bucket (many values alike, as the candidates of a dense selection are) is split
  // once more by its next 12 bits before the partial sort.
  if (scratch.size() > 4096) {
    counts.fill(0);
    for (float x : scratch) ++counts[(bits_of(x) >> 7) & 4095u];
    const std::uint32_t sub = pick_bucket(above);
    std::erase_if(scratch, [&](float x) { return ((bits_of(x) >> 7) & 4095u) != sub; });
  }
  const std::uint64_t r = c - above;  // the rank inside the (sub-)bucket
  std::nth_element(scratch.begin(), scratch.begin() + std::ptrdiff_t(r - 1), scratch.end(),
                   std::greater<>());
  RadixPick pick;
  pick.value = scratch[r - 1];
  pick.greater = above + std::uint64_t(std::count_if(scratch.begin(), scratch.end(),
                                                     [&](float x) { return x > pick.value; }));
  return pick;
}

}  // namespace gs
