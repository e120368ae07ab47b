#pragma once
// The `cuda-host` backend: the CUDA backend's pass code (kernels/src/portable/) compiled for the
// host, over host memory, single-threaded. Every function here runs exactly the logic its
// gs::kernels::cuda twin runs on a GPU (the same selection, radix top-k, samples and sidco-topk,
// the hand-written kernels' per-thread bodies over the grid a small GPU would launch), so tests
// check that logic against the naive oracle and the CPU backend on machines without a GPU. It is
// for checking, not for speed: use the CPU backend for work.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/kernels/select.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels::cuda_host {

double sum(const float* g, std::uint64_t n);
MagnitudeStats stats(const float* g, std::uint64_t n);
MagnitudeStats stats_above(const float* g, std::uint64_t n, double threshold, double shift);
std::uint64_t count_above(const float* g, std::uint64_t n, double threshold);
GpSums gp_sums(const float* g, std::uint64_t n, double theta, double threshold, double shift);
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int32_t* indices,
                            float* values, std::uint64_t capacity);
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int64_t* indices,
                            float* values, std::uint64_t capacity);
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int32_t* indices, float* values);
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int64_t* indices, float* values);
float kth_largest(const float* g, std::uint64_t n, std::uint64_t k);
SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                             Selection<std::int32_t>& out);
LogHistogram log_histogram(const float* g, std::uint64_t n, double lo, double hi, int bins);
std::vector<double> sorted_sample(const float* g, std::uint64_t n, std::uint64_t max_points,
                                  std::uint64_t seed, bool* subsampled);
void random_sample(const float* g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* out);

// gs::MagnitudePasses over a copy of host data (the copy stands for the device upload).
std::unique_ptr<gs::MagnitudePasses> make_passes(std::span<const float> host_data);
// The same over data in place (not owned; must outlive the object).
std::unique_ptr<gs::MagnitudePasses> make_passes(const float* g, std::uint64_t n);

// The Selector of this backend (make_selector(BackendKind::cuda_host)).
std::unique_ptr<Selector> make_selector();

// For tests of how callers treat device errors: after `allocations` more allocations of this
// backend, the next one throws the DeviceError a device out of memory gives (once; -1 cancels).
void fail_allocation_after(std::int64_t allocations);

}  // namespace gs::kernels::cuda_host
