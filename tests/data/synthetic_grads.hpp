#pragma once
// Gradient values any process can regenerate (the SWMR helper writes them, the test checks them).
#include <cstdint>
#include <random>
#include <vector>

#include "gs/data/snapshot.hpp"

namespace gs::data::test {

// Gradient values that any process can regenerate from (seed, step, layer): normal, with a few
// exact zeros, denormals and large magnitudes so bit-exactness is tested beyond easy values.
inline std::vector<float> synthetic_grad(std::uint64_t seed, std::int64_t step, std::size_t layer, std::int64_t numel) {
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<std::uint64_t>(step) * 7919ULL + layer);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> v(static_cast<std::size_t>(numel));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = normal(rng);
    if (rng() % 97 == 0) v[i] = 0.0f;
    if (rng() % 101 == 0) v[i] = 1e-40f;  // subnormal
    if (rng() % 103 == 0) v[i] *= 1e30f;
  }
  return v;
}

inline std::vector<LayerInfo> odd_layers() {
  return {
      {"conv1.weight", {8, 3, 5, 5}},
      {"conv1.bias", {8}},
      {"scale", {}},            // 0-d
      {"one", {1}},             // 1 element
      {"fc.weight", {37, 41}},  // 1517: bigger than the small test chunk cap
      {"fc.bias", {1, 1, 1, 7}},
      {"z.last", {3, 1, 2}},
  };
}

}  // namespace gs::data::test
