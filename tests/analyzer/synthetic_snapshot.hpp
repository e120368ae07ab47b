#pragma once
// Small snapshots of heavy-tailed synthetic gradients (Laplace- and gamma-like per layer), so the
// analyzer tests need no torch. Values depend only on (seed, step, layer): two files written with
// the same seed hold the same data for the steps they share.
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"

namespace gs::analyzer::test {

inline std::vector<data::LayerInfo> synthetic_layers() {
  return {{"conv1.weight", {8, 3, 5, 5}},
          {"conv1.bias", {8}},
          {"fc1.weight", {64, 50}},
          {"fc1.bias", {64}},
          {"norm.weight", {32}}};
}

inline std::vector<float> synthetic_values(std::uint64_t seed, std::int64_t step, std::size_t layer,
                                           std::int64_t numel) {
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<std::uint64_t>(step) * 7919ULL + layer);
  const double scale = 1e-3 * (1.0 + 0.5 * double(layer)) / (1.0 + 0.01 * double(step));
  std::exponential_distribution<double> expo(1.0);
  std::gamma_distribution<double> gamma(0.6, 1.0);
  std::vector<float> v(static_cast<std::size_t>(numel));
  for (auto& x : v) {
    const double sign = (rng() & 1) ? 1.0 : -1.0;
    const double mag = layer % 2 == 0 ? expo(rng) : gamma(rng);  // Laplace-like / gamma-like
    x = static_cast<float>(sign * scale * mag);
    if (rng() % 211 == 0) x = 0.0f;  // a few exact zeros
  }
  return v;
}

// Writes steps first_step, first_step + every, ... (count of them) to path.
inline void write_synthetic_snapshot(const std::filesystem::path& path, std::size_t count, std::uint64_t seed = 7,
                                     std::int64_t every = 10, const std::string& created = "2026-01-02T03:04:05Z") {
  data::SnapshotMeta meta;
  meta.model = "synthetic";
  meta.dataset = "none";
  meta.seed = seed;
  meta.created = created;
  data::WriterOptions wo;
  wo.force = true;
  wo.deflate_level = 1;
  data::SnapshotWriter w(path, meta, synthetic_layers(), wo);
  for (std::size_t s = 0; s < count; ++s) {
    const std::int64_t step = static_cast<std::int64_t>(s) * every;
    std::vector<std::vector<float>> grads;
    std::vector<std::span<const float>> spans;
    for (std::size_t l = 0; l < w.layers().size(); ++l)
      grads.push_back(synthetic_values(seed, step, l, w.layers()[l].numel()));
    for (const auto& g : grads) spans.emplace_back(g);
    w.append({step, 2.0 / (1.0 + double(s)), 0.1}, spans);
  }
  w.close();
}

}  // namespace gs::analyzer::test
