#pragma once
// Radix selection of the c-th largest among non-negative floats: the bit pattern of a non-negative
// float orders as its value, so one pass histograms the top 12 bits, a second collects the bucket
// that holds the answer, and only that bucket is partially sorted. For the small in-memory sets
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
  constexpr int kShift = 19;  // 32 bits - 12 kept - the sign bit (0 here)
  auto bucket = [](float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits >> kShift;
  };
  std::array<std::uint64_t, 4096> counts{};
  for_each([&](float x) { ++counts[bucket(x)]; });
  std::uint32_t b = 4096;
  std::uint64_t above = 0;
  while (b > 0 && above + counts[b - 1] < c) above += counts[--b];
  --b;  // the bucket holding the c-th largest
  scratch.clear();
  for_each([&](float x) {
    if (bucket(x) == b) scratch.push_back(x);
  });
  const std::uint64_t r = c - above;  // its rank inside the bucket
  std::nth_element(scratch.begin(), scratch.begin() + std::ptrdiff_t(r - 1), scratch.end(),
                   std::greater<>());
  RadixPick pick;
  pick.value = scratch[r - 1];
  pick.greater = above + std::uint64_t(std::count_if(scratch.begin(), scratch.end(),
                                                     [&](float x) { return x > pick.value; }));
  return pick;
}

}  // namespace gs
