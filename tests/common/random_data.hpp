#pragma once
// Random test vectors shared by the suites (fixed seeds, fresh data per case).
#include <cstdint>
#include <random>
#include <vector>

namespace gs::testing {

// Laplace-distributed values (|x| exponential with mean `scale`), the shape of real gradients'
// bulk.
inline std::vector<float> laplace(std::size_t n, std::uint64_t seed, float scale = 1e-3f) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(1.0f / scale);
  std::bernoulli_distribution sign;
  std::vector<float> g(n);
  for (auto& v : g) v = sign(rng) ? e(rng) : -e(rng);
  return g;
}

}  // namespace gs::testing
