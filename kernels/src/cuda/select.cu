// CUDA backend: compaction above a threshold, exact top-k by radix select, the k-th largest and
// sidco-topk, the portable passes (portable/passes.hpp) over the CUB primitives.
#include "../portable/passes.hpp"
#include "../portable/selector.hpp"
#include "cub_prims.cuh"

namespace gs::kernels::cuda {

using detail::CubBackend;
using detail::CubCall;

std::uint64_t compact_above(const float* d_g, std::uint64_t n, double threshold, std::int32_t* d_indices,
                            float* d_values, std::uint64_t capacity, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::compact_above(c.prims(), d_g, n, threshold, d_indices, d_values, capacity);
}
std::uint64_t compact_above(const float* d_g, std::uint64_t n, double threshold, std::int64_t* d_indices,
                            float* d_values, std::uint64_t capacity, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::compact_above(c.prims(), d_g, n, threshold, d_indices, d_values, capacity);
}
void topk(const float* d_g, std::uint64_t n, std::uint64_t k, std::int32_t* d_indices, float* d_values,
          cudaStream_t stream) {
  CubCall c(d_g, stream);
  portable::topk(c.prims(), d_g, n, k, d_indices, d_values);
}
void topk(const float* d_g, std::uint64_t n, std::uint64_t k, std::int64_t* d_indices, float* d_values,
          cudaStream_t stream) {
  CubCall c(d_g, stream);
  portable::topk(c.prims(), d_g, n, k, d_indices, d_values);
}

float kth_largest(const float* d_g, std::uint64_t n, std::uint64_t k, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::kth_largest(c.prims(), d_g, n, k);
}

SidcoSelectResult sidco_topk(const float* d_g, std::uint64_t n, double density, int stages,
                             Selection<std::int32_t>& out, cudaStream_t stream) {
  CubCall c(d_g, stream);
  return portable::sidco_topk(c.prims(), d_g, n, density, stages, out);
}

std::unique_ptr<Selector> make_selector(cudaStream_t stream) {
  return std::make_unique<portable::PortableSelector<CubBackend>>(CubBackend{stream}, BackendKind::cuda);
}

}  // namespace gs::kernels::cuda
