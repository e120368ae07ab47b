// StreamedPasses: every pass of MagnitudePasses as one visit of the segments, merging the CPU
// backend's results per segment (see gs/analyzer/streamed.hpp for what equals what).
#include "gs/analyzer/streamed.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::analyzer {
namespace {

using kernels::detail::element_hash;
using kernels::detail::hash_to_range;
using kernels::detail::key_to_float;
using kernels::detail::kNonfiniteKey;
using kernels::detail::magnitude_key;

bool finite_nonzero(float x) { return x > 0.0f && x <= std::numeric_limits<float>::max(); }

}  // namespace

StreamedPasses::StreamedPasses(const SegmentSource& source) : source_(source) {
  for (std::size_t s = 0; s < source_.count(); ++s) n_ += source_.size(s);
}

template <class Fn>
void StreamedPasses::each(Fn&& fn) {
  ++passes_;
  std::uint64_t offset = 0;
  for (std::size_t s = 0; s < source_.count(); ++s) {
    const std::span<const float> v = source_.get(s, scratch_);
    fn(v, offset);
    offset += v.size();
  }
}

fitting::MagnitudeStats StreamedPasses::stats_light(fitting::StatsFields fields) {
  fitting::MagnitudeStats r;
  each([&](std::span<const float> v, std::uint64_t) { r = merge(r, kernels::cpu::stats(v, fields)); });
  return r;
}

fitting::MagnitudeStats StreamedPasses::stats_above_light(double threshold, double shift, fitting::StatsFields fields) {
  fitting::MagnitudeStats r;
  each([&](std::span<const float> v, std::uint64_t) {
    r = merge(r, kernels::cpu::stats_above(v, threshold, shift, fields));
  });
  return r;
}

std::uint64_t StreamedPasses::count_above(double threshold) {
  std::uint64_t c = 0;
  each([&](std::span<const float> v, std::uint64_t) { c += kernels::cpu::count_above(v, threshold); });
  return c;
}

fitting::GpSums StreamedPasses::gp_sums(double theta, double threshold, double shift) {
  fitting::GpSums r;
  each([&](std::span<const float> v, std::uint64_t) {
    const fitting::GpSums s = kernels::cpu::gp_sums(v, theta, threshold, shift);
    r.count += s.count;
    r.sum_log1p += s.sum_log1p;
    r.sum_inv += s.sum_inv;
    r.sum_inv2 += s.sum_inv2;
  });
  return r;
}

std::vector<double> StreamedPasses::sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) {
  if (max_points == 0) throw Error("sorted_sample: max_points must be at least 1");
  const std::uint64_t available = count_above(0.0);
  if (available <= max_points) {
    std::vector<float> x;
    x.reserve(available);
    each([&](std::span<const float> v, std::uint64_t) {
      for (float g : v)
        if (finite_nonzero(std::fabs(g))) x.push_back(std::fabs(g));
    });
    if (subsampled) *subsampled = false;
    return kernels::detail::sorted_widened(x);  // the CPU backend's sort: the same vector
  }
  // The CPU backend's rule (kernels::detail::sample_keep_probability) over global indices.
  using Keyed = kernels::detail::HashKept;
  double p = kernels::detail::sample_keep_probability(max_points, available);
  std::vector<Keyed> kept;
  for (;;) {
    const std::uint64_t cutoff = kernels::detail::sample_hash_cutoff(p);
    kept.clear();
    each([&](std::span<const float> v, std::uint64_t offset) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        const float x = std::fabs(v[i]);
        if (!finite_nonzero(x)) continue;
        const std::uint64_t h = element_hash(seed, offset + i);
        if (h < cutoff) kept.push_back({h, offset + i, x});
      }
    });
    if (kept.size() >= max_points) break;
    if (p >= 1.0) throw kernels::detail::sample_count_changed(available, kept.size());
    p = std::min(1.0, 4.0 * p);
  }
  if (subsampled) *subsampled = true;
  return kernels::detail::smallest_hash_values(kept, max_points);
}

double StreamedPasses::kth_largest(std::uint64_t k) {
  if (k == 0) throw Error("kth_largest: k must be at least 1 (k = 1 is the maximum)");
  // Three digits of the 31 magnitude bits, most significant first: each pass histograms the next
  // digit among the keys that share the prefix chosen so far, so no candidate is ever stored.
  struct Digit {
    int shift, bits;
  };
  constexpr Digit digits[3] = {{20, 11}, {10, 10}, {0, 10}};
  std::uint32_t prefix = 0;  // the chosen digits, in place
  std::uint64_t above = 0;   // finite keys greater than every key with the prefix so far
  for (int d = 0; d < 3; ++d) {
    const Digit digit = digits[d];
    const int high = digit.shift + digit.bits;  // bits at and above `high` form the prefix
    std::vector<std::uint64_t> hist(std::size_t{1} << digit.bits, 0);
    each([&](std::span<const float> v, std::uint64_t) {
      for (float g : v) {
        const std::uint32_t key = magnitude_key(g);
        if (key >= kNonfiniteKey) continue;
        if (high < 31 && (key >> high) != (prefix >> high)) continue;
        ++hist[(key >> digit.shift) & ((1u << digit.bits) - 1)];
      }
    });
    std::size_t b = hist.size();
    for (;;) {
      if (b == 0)
        throw Error("kth_largest: k = " + std::to_string(k) + " exceeds the finite values (" + std::to_string(above) +
                    ")");
      --b;
      if (above + hist[b] >= k) break;
      above += hist[b];
    }
    prefix |= static_cast<std::uint32_t>(b) << digit.shift;
  }
  return key_to_float(prefix);
}

std::vector<float> StreamedPasses::random_sample(std::uint64_t m, std::uint64_t seed) {
  if (n_ == 0 && m > 0) throw Error("random_sample: cannot sample from an empty vector");
  if (m > std::numeric_limits<std::uint32_t>::max()) throw Error("random_sample: at most 2^32 - 1 draws when streamed");
  // The CPU backend's draws: draw t reads global index j(t). Draws are grouped by the segment
  // they read (a counting sort of t, 4 bytes a draw), then served in one pass.
  auto index_of = [&](std::uint64_t t) { return hash_to_range(element_hash(seed, t), n_); };
  std::vector<std::uint64_t> starts{0};
  for (std::size_t s = 0; s < source_.count(); ++s) starts.push_back(starts.back() + source_.size(s));
  auto segment_of = [&](std::uint64_t j) {
    return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), j) - starts.begin() - 1);
  };
  std::vector<std::uint64_t> first(source_.count() + 1, 0);  // bucket bounds, then write positions
  for (std::uint64_t t = 0; t < m; ++t) ++first[segment_of(index_of(t)) + 1];
  for (std::size_t s = 0; s < source_.count(); ++s) first[s + 1] += first[s];
  std::vector<std::uint32_t> draws(m);
  std::vector<std::uint64_t> at(first.begin(), first.end() - 1);
  for (std::uint64_t t = 0; t < m; ++t) draws[at[segment_of(index_of(t))]++] = static_cast<std::uint32_t>(t);
  std::vector<float> out(m);
  std::size_t segment = 0;
  each([&](std::span<const float> v, std::uint64_t offset) {
    for (std::uint64_t d = first[segment]; d < first[segment + 1]; ++d)
      out[draws[d]] = std::fabs(v[index_of(draws[d]) - offset]);
    ++segment;
  });
  return out;
}

std::vector<float> StreamedPasses::spread_sample(std::uint64_t lines, std::uint64_t line_length) {
  if (lines == 0 || line_length == 0) throw Error("spread_sample: lines and their length must be >= 1");
  // As the CPU backend: g's values as they are, every one when g is shorter than the runs.
  const bool all = n_ < lines * line_length;
  std::vector<float> out(all ? n_ : lines * line_length);
  // Global index of out[o]: o itself, or run l's start plus the position in the run.
  auto source_index = [&](std::uint64_t o) {
    return all ? o : fitting::spread_line_start(n_, lines, line_length, o / line_length) + o % line_length;
  };
  std::uint64_t o = 0;
  each([&](std::span<const float> v, std::uint64_t offset) {
    for (; o < out.size(); ++o) {
      const std::uint64_t j = source_index(o);
      if (j >= offset + v.size()) break;
      out[o] = v[j - offset];
    }
  });
  return out;
}

}  // namespace gs::analyzer
