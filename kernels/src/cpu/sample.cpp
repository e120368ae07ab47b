// CPU backend: sorted (sub)samples for KS/AD, DGC's random sample, and CpuPasses.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "parallel.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::cpu {
namespace {

using kernels::detail::element_hash;
using Keyed = kernels::detail::HashKept;

// Finite non-zero x whose hash is below cutoff, in index order (per-chunk lists, concatenated).
std::vector<Keyed> hash_filter(std::span<const float> g, std::uint64_t seed, std::uint64_t cutoff) {
  const std::size_t chunks = detail::chunk_count(g.size());
  std::vector<std::vector<Keyed>> parts(chunks);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks); ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    const std::size_t end = std::min(g.size(), begin + kChunk);
    for (std::size_t i = begin; i < end; ++i) {
      const float x = std::fabs(g[i]);
      if (!(x > 0.0f && x <= std::numeric_limits<float>::max())) continue;
      const std::uint64_t h = element_hash(seed, i);
      if (h < cutoff) parts[c].push_back({h, i, x});
    }
  }
  std::vector<Keyed> all;
  for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

}  // namespace

std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled) {
  if (max_points == 0) throw gs::Error("sorted_sample: max_points must be at least 1");
  const std::uint64_t finite_nonzero = count_above(g, 0.0);  // pass 1
  if (finite_nonzero <= max_points) {
    std::vector<float> x = std::move(select_above64(g, 0.0).values);  // pass 2
    for (float& v : x) v = std::fabs(v);
    if (subsampled) *subsampled = false;
    return kernels::detail::sorted_widened(x);
  }
  // Keep the max_points elements of smallest hash: a uniform subsample without replacement
  // that does not depend on the thread count or the backend. The filter keeps each element with
  // probability p, set a few standard deviations above the need; a miss retries with 4p.
  double p = kernels::detail::sample_keep_probability(max_points, finite_nonzero);
  std::vector<Keyed> kept;
  for (;;) {
    kept = hash_filter(g, seed, kernels::detail::sample_hash_cutoff(p));  // pass 2
    if (kept.size() >= max_points) break;
    if (p >= 1.0) throw kernels::detail::sample_count_changed(finite_nonzero, kept.size());  // never loop on it
    p = std::min(1.0, 4.0 * p);
  }
  if (subsampled) *subsampled = true;
  return kernels::detail::smallest_hash_values(kept, max_points);
}

std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed) {
  if (g.empty() && m > 0) throw gs::Error("random_sample: cannot sample from an empty vector");
  std::vector<float> out(m);
  const std::uint64_t n = g.size();
#pragma omp parallel for schedule(static) if (m > 65536)
  for (std::int64_t t = 0; t < static_cast<std::int64_t>(m); ++t) {
    const std::uint64_t j = kernels::detail::hash_to_range(element_hash(seed, static_cast<std::uint64_t>(t)), n);
    out[t] = std::fabs(g[j]);
  }
  return out;
}

fitting::MagnitudeStats CpuPasses::stats_above(double threshold, double shift) {
  return cpu::stats_above(g_, threshold, shift);
}
std::uint64_t CpuPasses::count_above(double threshold) { return cpu::count_above(g_, threshold); }
fitting::GpSums CpuPasses::gp_sums(double theta, double threshold, double shift) {
  return cpu::gp_sums(g_, theta, threshold, shift);
}
std::vector<double> CpuPasses::sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) {
  return cpu::sorted_sample(g_, max_points, seed, subsampled);
}
double CpuPasses::kth_largest(std::uint64_t k) { return cpu::kth_largest(g_, k); }
std::vector<float> CpuPasses::random_sample(std::uint64_t m, std::uint64_t seed) {
  return cpu::random_sample(g_, m, seed);
}

void spread_sample(std::span<const float> g, std::uint64_t lines, std::uint64_t line_length, std::vector<float>& out) {
  if (lines == 0 || line_length == 0) throw gs::Error("spread_sample: lines and their length must be >= 1");
  if (g.size() < lines * line_length) {
    out.assign(g.begin(), g.end());
    return;
  }
  out.resize(lines * line_length);
  for (std::uint64_t l = 0; l < lines; ++l)
    std::memcpy(out.data() + l * line_length, g.data() + fitting::spread_line_start(g.size(), lines, line_length, l),
                line_length * sizeof(float));
}

std::vector<float> CpuPasses::spread_sample(std::uint64_t lines, std::uint64_t line_length) {
  std::vector<float> out;
  cpu::spread_sample(g_, lines, line_length, out);
  return out;
}

}  // namespace gs::kernels::cpu
