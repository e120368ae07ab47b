// CUDA backend: DGC's random sample, the sorted (sub)sample of KS/AD (the same elements as the CPU
// backend: smallest hashes) and gs::MagnitudePasses over device memory, the portable passes
// (portable/passes.hpp) over the CUB primitives.
#include "../portable/passes.hpp"
#include "cub_prims.cuh"

namespace gs::kernels::cuda {

using detail::CubBackend;
using detail::CubCall;

void random_sample(const float* d_g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* d_out,
                   cudaStream_t stream) {
  CubCall c(d_g, stream);
  portable::random_sample(c.prims(), d_g, n, m, seed, d_out);
}

std::vector<double> sorted_sample(const float* d_g, std::uint64_t n, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::sorted_sample(c.prims(), d_g, n, max_points, seed, subsampled);
}

std::unique_ptr<gs::fitting::MagnitudePasses> make_device_passes(std::span<const float> host_data) {
  return std::make_unique<portable::Passes<CubBackend>>(CubBackend{}, host_data);
}
std::unique_ptr<gs::fitting::MagnitudePasses> make_device_passes(const float* d_g, std::uint64_t n,
                                                                 cudaStream_t stream) {
  return std::make_unique<portable::Passes<CubBackend>>(CubBackend{stream}, d_g, n);
}

}  // namespace gs::kernels::cuda
