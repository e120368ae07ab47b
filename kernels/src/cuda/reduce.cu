// CUDA backend: the one-read passes (sum, fused statistics, counts, GP sums, log histogram), the
// portable passes (portable/passes.hpp) over the CUB primitives.
#include "../portable/passes.hpp"
#include "cub_prims.cuh"

namespace gs::kernels::cuda {

using detail::CubPrims;

double sum(const float* d_g, std::uint64_t n, cudaStream_t stream) {
  CubPrims p(stream);
  return portable::sum(p, d_g, n);
}

MagnitudeStats stats(const float* d_g, std::uint64_t n, cudaStream_t stream) {
  CubPrims p(stream);
  return portable::stats(p, d_g, n);
}

MagnitudeStats stats_above(const float* d_g, std::uint64_t n, double threshold, double shift,
                           cudaStream_t stream) {
  CubPrims p(stream);
  return portable::stats_above(p, d_g, n, threshold, shift);
}

std::uint64_t count_above(const float* d_g, std::uint64_t n, double threshold, cudaStream_t stream) {
  CubPrims p(stream);
  return portable::count_above(p, d_g, n, threshold);
}

GpSums gp_sums(const float* d_g, std::uint64_t n, double theta, double threshold, double shift,
               cudaStream_t stream) {
  CubPrims p(stream);
  return portable::gp_sums(p, d_g, n, theta, threshold, shift);
}

LogHistogram log_histogram(const float* d_g, std::uint64_t n, double lo, double hi, int bins,
                           cudaStream_t stream) {
  CubPrims p(stream);
  return portable::log_histogram(p, d_g, n, lo, hi, bins);
}

}  // namespace gs::kernels::cuda
