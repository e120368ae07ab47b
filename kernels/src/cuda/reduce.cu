// CUDA backend: the one-read passes (sum, fused statistics, counts, GP sums, log histogram), the
// portable passes (portable/passes.hpp) over the CUB primitives.
#include "../portable/passes.hpp"
#include "cub_prims.cuh"

namespace gs::kernels::cuda {

using detail::CubBackend;
using detail::CubCall;

double sum(const float* d_g, std::uint64_t n, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::sum(c.prims(), d_g, n);
}

fitting::MagnitudeStats stats(const float* d_g, std::uint64_t n, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::stats(c.prims(), d_g, n);
}

fitting::MagnitudeStats stats_above(const float* d_g, std::uint64_t n, double threshold, double shift,
                                    cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::stats_above(c.prims(), d_g, n, threshold, shift);
}

std::uint64_t count_above(const float* d_g, std::uint64_t n, double threshold, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::count_above(c.prims(), d_g, n, threshold);
}

fitting::GpSums gp_sums(const float* d_g, std::uint64_t n, double theta, double threshold, double shift,
                        cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::gp_sums(c.prims(), d_g, n, theta, threshold, shift);
}

LogHistogram log_histogram(const float* d_g, std::uint64_t n, double lo, double hi, int bins, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::log_histogram(c.prims(), d_g, n, lo, hi, bins);
}

}  // namespace gs::kernels::cuda
