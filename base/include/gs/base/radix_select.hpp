#pragma once
// Radix selection of the c-th largest among non-negative floats: the bit pattern of a non-negative
// float orders as its value, so a histogram of the top 12 bits finds the bucket that holds the
// answer, a second pass collects that bucket (split by its next 12 bits when crowded), and only
// that is partially sorted. One histogram serves several ranks. For the small in-memory sets that
// sidco-topk picks from (a sample, a list of candidates); kernels/ has the pass over whole vectors
// (cpu::kth_largest).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

namespace gs {

struct RadixPick {
  float value = 0.0f;         // the c-th largest
  std::uint64_t greater = 0;  // values strictly greater than it
};

class RadixSelector {
 public:
  static std::uint32_t bits_of(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b & 0x7fffffffu;
  }
  static std::uint32_t top_bucket(float x) { return bits_of(x) >> 19; }

  RadixSelector() { counts_.fill(0); }
  // The histogram, one value at a time (x >= 0, finite).
  void count(float x) { ++counts_[top_bucket(x)]; }
  // The histogram of a whole span. Neighbours often fall in the same bucket, and an increment
  // waits for the one before it to the same counter: four interleaved partial histograms keep
  // the increments independent.
  void count_all(std::span<const float> xs) {
    std::array<std::array<std::uint32_t, 4096>, 4> part{};
    std::size_t i = 0;
    for (; i + 4 <= xs.size(); i += 4)
      for (int j = 0; j < 4; ++j) ++part[std::size_t(j)][top_bucket(xs[i + std::size_t(j)])];
    for (; i < xs.size(); ++i) ++part[0][top_bucket(xs[i])];
    for (std::size_t b = 0; b < 4096; ++b)
      counts_[b] += std::uint64_t(part[0][b]) + part[1][b] + part[2][b] + part[3][b];
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : counts_) t += c;
    return t;
  }

  // The c-th largest (1 <= c <= total()). for_each(f) must call f(x) for every value counted.
  template <class ForEach>
  RadixPick pick(ForEach&& for_each, std::uint64_t c, std::vector<float>& scratch) const {
    std::uint64_t above = 0;
    const std::uint32_t bucket = find(counts_, c, above);
    scratch.clear();
    for_each([&](float x) {
      if (top_bucket(x) == bucket) scratch.push_back(x);
    });
    // A crowded bucket (values alike, as the candidates of a dense selection are) is split once
    // more by its next 12 bits before the partial sort.
    if (scratch.size() > 4096) {
      std::array<std::uint64_t, 4096> inner{};
      for (float x : scratch) ++inner[(bits_of(x) >> 7) & 4095u];
      const std::uint32_t sub = find(inner, c, above);
      std::erase_if(scratch, [&](float x) { return ((bits_of(x) >> 7) & 4095u) != sub; });
    }
    const std::uint64_t r = c - above;  // the rank inside what is left
    std::nth_element(scratch.begin(), scratch.begin() + std::ptrdiff_t(r - 1), scratch.end(), std::greater<>());
    RadixPick p;
    p.value = scratch[r - 1];
    p.greater =
        above + std::uint64_t(std::count_if(scratch.begin(), scratch.end(), [&](float x) { return x > p.value; }));
    return p;
  }

 private:
  // The bucket of `counts` holding the c-th largest; `above` grows by the values above it.
  static std::uint32_t find(const std::array<std::uint64_t, 4096>& counts, std::uint64_t c, std::uint64_t& above) {
    std::uint32_t b = 4096;
    while (b > 1 && above + counts[b - 1] < c) above += counts[--b];
    return b - 1;
  }

  std::array<std::uint64_t, 4096> counts_;
};

// The c-th largest of the values for_each(f) visits (twice, in the same order).
template <class ForEach>
RadixPick radix_largest(ForEach&& for_each, std::uint64_t c, std::vector<float>& scratch) {
  RadixSelector s;
  for_each([&](float x) { s.count(x); });
  return s.pick(for_each, c, scratch);
}

}  // namespace gs
