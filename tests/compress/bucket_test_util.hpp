#pragma once
// What the BucketCompressor suites share: gradients with a few large values, and a bucket
// compressor seeded per worker as the DDP hook seeds it.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/collectives.hpp"

namespace gs::testing {

// Laplace-like values, a few large, different per seed.
inline std::vector<float> grad(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.01f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = d(rng) * std::pow(u(rng), 4.0f);
  return g;
}

// Laplace values: |g| exponential, the law SIDCo-E fits, so its selection lands near the density.
inline std::vector<float> laplace(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(100.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> g(n);
  for (auto& v : g) v = sign(rng) ? e(rng) : -e(rng);
  return g;
}

inline compress::CompressorOptions seeded(int rank, const std::string& backend = "cpu") {
  compress::CompressorOptions o;
  o.seed = compress::worker_seed(7, std::uint64_t(rank));
  o.backend = backend;
  return o;
}

inline std::unique_ptr<compress::BucketCompressor> make_bucket(const std::string& method, double density, int rank,
                                                               compress::WarmupSchedule w = {},
                                                               const std::string& backend = "cpu") {
  return std::make_unique<compress::BucketCompressor>(compress::make_compressor(method, density, seeded(rank, backend)),
                                                      w);
}

// DeviceCollectives over host collectives: cuda-host's device memory is host memory, so the
// pairs can travel through the threads' all-gather as NCCL would carry them between GPUs.
class ThreadDeviceCollectives final : public compress::DeviceCollectives {
 public:
  explicit ThreadDeviceCollectives(compress::Collectives& c) : c_(c) {}
  void allgather(const std::int32_t* indices, const float* values, std::uint64_t count, std::int32_t* indices_all,
                 float* values_all) override {
    gather(indices, count, indices_all);
    gather(values, count, values_all);
  }
  void allreduce_sum(float* values, std::uint64_t n) override { c_.allreduce_sum(std::span(values, n)); }

 private:
  template <class T>
  void gather(const T* mine, std::uint64_t count, T* all) {
    const auto parts = c_.allgather(std::as_bytes(std::span(mine, count)));
    for (std::size_t r = 0; r < parts.size(); ++r) std::memcpy(all + r * count, parts[r].data(), parts[r].size());
  }
  compress::Collectives& c_;
};

}  // namespace gs::testing
