// CPU backend: the sort of the KS/AD samples (sorted_sample, smallest_hash_values).
//
// The sample is up to a million positive finite floats, and std::sort on their widened doubles
// costs several times this sort (docs/BENCHMARKS.md, "Analysis of one ResNet-50 step against one
// sort of |g|", radix-sorted samples). Positive finite floats order like their bit patterns read
// as unsigned integers, so an LSD radix sort on those bits orders them with a few linear passes.
// Four digits of 8 bits (the sign bit is 0): on a 1M-value sample a scatter pass with 256 buckets
// timed well under one with 2048 (three digits of 11 bits; no benchmark case keeps that
// comparison), and the fourth pass is cheap (gradient magnitudes share most exponent bits, or the
// digit is skipped). Equal values are indistinguishable once widened, so the result is exactly
// the vector std::sort would give.
#include <array>
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
#include <vector>

#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::detail {
namespace {

constexpr int kDigitBits = 8;
constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
constexpr int kDigits = 4;
// Below this size setting up the histograms costs more than a comparison sort.
constexpr std::size_t kRadixMin = 256;

inline std::size_t digit(float x, int d) {
  return (std::bit_cast<std::uint32_t>(x) >> (d * kDigitBits)) & (kBuckets - 1);
}

using Histogram = std::array<std::size_t, kBuckets>;

// Counts to starting offsets, in place.
void exclusive_scan(Histogram& h) {
  std::size_t at = 0;
  for (std::size_t& c : h) {
    const std::size_t k = c;
    c = at;
    at += k;
  }
}

}  // namespace

std::vector<double> sorted_widened(std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<double> out(n);
  if (n < kRadixMin) {
    std::sort(x.begin(), x.end());
    std::copy(x.begin(), x.end(), out.begin());
    return out;
  }
  // One read counts every digit.
  std::vector<Histogram> count(kDigits, Histogram{});
  for (const float v : x) {
    assert(v > 0.0f && std::bit_cast<std::uint32_t>(v) < kNonfiniteKey);
    for (int d = 0; d < kDigits; ++d) ++count[d][digit(v, d)];
  }
  // A digit that every key shares moves nothing: skip its pass (tight samples share the top one).
  std::vector<int> passes;
  for (int d = 0; d < kDigits; ++d)
    if (count[d][digit(x[0], d)] != n) passes.push_back(d);
  if (passes.empty()) {  // all equal
    std::copy(x.begin(), x.end(), out.begin());
    return out;
  }
  // Passes alternate between x and one scratch buffer; the last one writes the widened doubles.
  std::vector<float> scratch(passes.size() > 1 ? n : 0);
  float* src = x.data();
  float* dst = scratch.data();
  for (std::size_t p = 0; p < passes.size(); ++p) {
    const int d = passes[p];
    Histogram& at = count[d];
    exclusive_scan(at);
    if (p + 1 < passes.size()) {
      for (std::size_t i = 0; i < n; ++i) dst[at[digit(src[i], d)]++] = src[i];
      std::swap(src, dst);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[at[digit(src[i], d)]++] = static_cast<double>(src[i]);
    }
  }
  return out;
}

}  // namespace gs::kernels::detail
