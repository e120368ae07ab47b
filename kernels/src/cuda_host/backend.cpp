// The `cuda-host` backend: the portable passes (portable/passes.hpp) over the host primitives.
#include "gs/kernels/cuda_host.hpp"

#include "../portable/passes.hpp"
#include "../portable/selector.hpp"
#include "../portable/vector_ops.hpp"
#include "host_prims.hpp"

namespace gs::kernels::cuda_host {

namespace {
HostPrims p;
}

double sum(const float* g, std::uint64_t n) { return portable::sum(p, g, n); }
fitting::MagnitudeStats stats(const float* g, std::uint64_t n) { return portable::stats(p, g, n); }
fitting::MagnitudeStats stats_above(const float* g, std::uint64_t n, double threshold, double shift) {
  return portable::stats_above(p, g, n, threshold, shift);
}
std::uint64_t count_above(const float* g, std::uint64_t n, double threshold) {
  return portable::count_above(p, g, n, threshold);
}
fitting::GpSums gp_sums(const float* g, std::uint64_t n, double theta, double threshold, double shift) {
  return portable::gp_sums(p, g, n, theta, threshold, shift);
}
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int32_t* indices, float* values,
                            std::uint64_t capacity) {
  return portable::compact_above(p, g, n, threshold, indices, values, capacity);
}
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int64_t* indices, float* values,
                            std::uint64_t capacity) {
  return portable::compact_above(p, g, n, threshold, indices, values, capacity);
}
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int32_t* indices, float* values) {
  portable::topk(p, g, n, k, indices, values);
}
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int64_t* indices, float* values) {
  portable::topk(p, g, n, k, indices, values);
}
float kth_largest(const float* g, std::uint64_t n, std::uint64_t k) { return portable::kth_largest(p, g, n, k); }
SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                             Selection<std::int32_t>& out) {
  return portable::sidco_topk(p, g, n, density, stages, out);
}
LogHistogram log_histogram(const float* g, std::uint64_t n, double lo, double hi, int bins) {
  return portable::log_histogram(p, g, n, lo, hi, bins);
}
std::vector<double> sorted_sample(const float* g, std::uint64_t n, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled) {
  return portable::sorted_sample(p, g, n, max_points, seed, subsampled);
}
void random_sample(const float* g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* out) {
  portable::random_sample(p, g, n, m, seed, out);
}

std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(std::span<const float> host_data) {
  return std::make_unique<portable::Passes<HostBackend>>(HostBackend{}, host_data);
}
std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(const float* g, std::uint64_t n) {
  return std::make_unique<portable::Passes<HostBackend>>(HostBackend{}, g, n);
}

std::unique_ptr<Selector> make_selector() {
  return std::make_unique<portable::PortableSelector<HostBackend>>(HostBackend{}, BackendKind::cuda_host);
}

std::unique_ptr<VectorOps> make_vector_ops(int device) {
  device_policy().properties(device);  // gs::Error for a device that does not exist
  return std::make_unique<portable::PortableVectorOps<HostBackend>>(HostBackend{}, BackendKind::cuda_host, device,
                                                                    runtime());
}

void fail_allocation_after(std::int64_t allocations) { allocations_before_failure = allocations; }
std::uint64_t allocated_bytes() { return bytes_allocated.load(); }
std::uint64_t scratch_allocations() { return scratch_allocated.load(); }

}  // namespace gs::kernels::cuda_host
