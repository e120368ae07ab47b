// CUDA backend: DGC's random sample, sorted (sub)samples for KS/AD (same elements as the CPU
// backend: smallest hashes), and MagnitudePasses over device memory.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_common.cuh"
#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::cuda {
namespace {

using detail::kThreads;
using kernels::detail::element_hash;

__global__ void random_sample_kernel(const float* __restrict__ g, std::uint64_t n, std::uint64_t m,
                                     std::uint64_t seed, float* __restrict__ out) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t t = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; t < m; t += stride)
    out[t] = fabsf(g[kernels::detail::hash_to_range(element_hash(seed, t), n)]);
}

struct HashBelow {
  const float* g;
  std::uint64_t seed, cutoff;
  __device__ bool operator()(std::int64_t i) const {
    const float x = fabsf(g[i]);
    return x > 0.0f && x <= 3.40282347e38f && element_hash(seed, std::uint64_t(i)) < cutoff;
  }
};
struct HashBelowCount {
  HashBelow pred;
  __device__ unsigned long long operator()(std::int64_t i) const { return pred(i) ? 1ull : 0ull; }
};

__global__ void hash_and_value(const float* __restrict__ g, const std::int64_t* __restrict__ idx,
                               std::uint64_t m, std::uint64_t seed, std::uint64_t* __restrict__ h,
                               float* __restrict__ x) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; j < m; j += stride) {
    h[j] = element_hash(seed, std::uint64_t(idx[j]));
    x[j] = fabsf(g[idx[j]]);
  }
}

// The spread sample's runs, gathered into one buffer (gs::spread_line_start places run l).
__global__ void spread_kernel(const float* __restrict__ g, std::uint64_t n, std::uint64_t lines,
                              std::uint64_t len, float* __restrict__ out) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; j < lines * len; j += stride)
    out[j] = g[gs::spread_line_start(n, lines, len, j / len) + j % len];
}

__global__ void abs_in_place(float* v, std::uint64_t m) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; j < m; j += stride)
    v[j] = fabsf(v[j]);
}

std::vector<double> sort_to_host(DeviceBuffer<float>& d_x, std::uint64_t m, cudaStream_t stream) {
  DeviceBuffer<float> sorted(m, stream);
  if (m > 0)
    detail::cub_run(
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceRadixSort::SortKeys(temp, bytes, d_x.data(), sorted.data(),
                                                static_cast<std::int64_t>(m), 0, 32, stream);
        },
        stream);
  std::vector<float> host(m);
  copy_to_host(host.data(), sorted.data(), m * sizeof(float), stream);
  return std::vector<double>(host.begin(), host.end());
}

class DevicePasses final : public gs::MagnitudePasses {
 public:
  DevicePasses(std::span<const float> host, cudaStream_t stream)
      : owned_(host.size(), stream), d_g_(owned_.data()), n_(host.size()), stream_(stream) {
    owned_.upload(host);
  }
  DevicePasses(const float* d_g, std::uint64_t n, cudaStream_t stream)
      : d_g_(d_g), n_(n), stream_(stream) {}
  std::uint64_t size() const override { return n_; }
  MagnitudeStats stats() override { return cuda::stats(d_g_, n_, stream_); }
  MagnitudeStats stats_above(double t, double shift) override {
    return cuda::stats_above(d_g_, n_, t, shift, stream_);
  }
  std::uint64_t count_above(double t) override { return cuda::count_above(d_g_, n_, t, stream_); }
  GpSums gp_sums(double theta, double t, double shift) override {
    return cuda::gp_sums(d_g_, n_, theta, t, shift, stream_);
  }
  std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed,
                                    bool* subsampled) override {
    return cuda::sorted_sample(d_g_, n_, max_points, seed, subsampled, stream_);
  }
  double kth_largest(std::uint64_t k) override { return cuda::kth_largest(d_g_, n_, k, stream_); }
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override {
    DeviceBuffer<float> d_out(m, stream_);
    cuda::random_sample(d_g_, n_, m, seed, d_out.data(), stream_);
    return d_out.download();
  }
  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t len) override {
    if (lines == 0 || len == 0) throw gs::Error("spread_sample: lines and their length must be >= 1");
    if (n_ < lines * len) {
      std::vector<float> all(n_);
      copy_to_host(all.data(), d_g_, n_ * sizeof(float), stream_);
      return all;
    }
    DeviceBuffer<float> d_out(lines * len, stream_);
    spread_kernel<<<detail::grid_for(lines * len), kThreads, 0, stream_>>>(d_g_, n_, lines, len, d_out.data());
    GS_CUDA_CHECK_LAUNCH();
    return d_out.download();
  }

 private:
  DeviceBuffer<float> owned_;
  const float* d_g_;
  std::uint64_t n_;
  cudaStream_t stream_;
};

}  // namespace

void random_sample(const float* d_g, std::uint64_t n, std::uint64_t m, std::uint64_t seed,
                   float* d_out, cudaStream_t stream) {
  if (m == 0) return;
  if (n == 0) throw gs::Error("random_sample: cannot sample from an empty vector");
  random_sample_kernel<<<detail::grid_for(m), kThreads, 0, stream>>>(d_g, n, m, seed, d_out);
  GS_CUDA_CHECK_LAUNCH();
}

std::vector<double> sorted_sample(const float* d_g, std::uint64_t n, std::uint64_t max_points,
                                  std::uint64_t seed, bool* subsampled, cudaStream_t stream) {
  if (max_points == 0) throw gs::Error("sorted_sample: max_points must be at least 1");
  const std::uint64_t finite_nonzero = count_above(d_g, n, 0.0, stream);  // pass 1
  if (finite_nonzero <= max_points) {
    DeviceBuffer<std::int64_t> idx(finite_nonzero, stream);
    DeviceBuffer<float> x(finite_nonzero, stream);
    compact_above(d_g, n, 0.0, idx.data(), x.data(), finite_nonzero, stream);  // pass 2
    if (finite_nonzero > 0) {
      abs_in_place<<<detail::grid_for(finite_nonzero), kThreads, 0, stream>>>(x.data(), finite_nonzero);
      GS_CUDA_CHECK_LAUNCH();
    }
    if (subsampled) *subsampled = false;
    return sort_to_host(x, finite_nonzero, stream);
  }
  // As on the CPU: keep hashes below a cutoff (about 1.1 max_points survive), retry with 4p if too
  // few did, then the max_points smallest hashes (stable radix sort: ties by index, as the CPU).
  const double m = static_cast<double>(max_points);
  double p = std::min(1.0, (m + 6.0 * std::sqrt(m) + 64.0) / static_cast<double>(finite_nonzero));
  for (;;) {
    const std::uint64_t cutoff = p >= 1.0 ? std::numeric_limits<std::uint64_t>::max()
                                          : static_cast<std::uint64_t>(p * 18446744073709551616.0);
    const HashBelow pred{d_g, seed, cutoff};
    DeviceBuffer<unsigned long long> d_kept(1, stream);
    thrust::transform_iterator<HashBelowCount, thrust::counting_iterator<std::int64_t>> flags(
        thrust::counting_iterator<std::int64_t>(0), HashBelowCount{pred});
    detail::cub_run(
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceReduce::Sum(temp, bytes, flags, d_kept.data(),
                                        static_cast<std::int64_t>(n), stream);
        },
        stream);
    const std::uint64_t kept = detail::read_back(d_kept.data(), stream);
    if (kept < max_points) {
      if (p >= 1.0) throw kernels::detail::sample_count_changed(finite_nonzero, kept);  // never loop on it
      p = std::min(1.0, 4.0 * p);
      continue;
    }
    DeviceBuffer<std::int64_t> idx(kept, stream);
    DeviceBuffer<unsigned long long> d_count(1, stream);
    thrust::counting_iterator<std::int64_t> first(0);
    detail::cub_run(
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceSelect::If(temp, bytes, first, idx.data(), d_count.data(),
                                       static_cast<std::int64_t>(n), pred, stream);
        },
        stream);
    DeviceBuffer<std::uint64_t> h(kept, stream), h_sorted(kept, stream);
    DeviceBuffer<float> x(kept, stream), x_sorted(kept, stream);
    hash_and_value<<<detail::grid_for(kept), kThreads, 0, stream>>>(d_g, idx.data(), kept, seed,
                                                                    h.data(), x.data());
    GS_CUDA_CHECK_LAUNCH();
    detail::cub_run(
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceRadixSort::SortPairs(temp, bytes, h.data(), h_sorted.data(), x.data(),
                                                 x_sorted.data(), static_cast<std::int64_t>(kept),
                                                 0, 64, stream);
        },
        stream);
    if (subsampled) *subsampled = true;
    return sort_to_host(x_sorted, max_points, stream);
  }
}

std::unique_ptr<gs::MagnitudePasses> make_device_passes(std::span<const float> host_data) {
  return std::make_unique<DevicePasses>(host_data, nullptr);
}
std::unique_ptr<gs::MagnitudePasses> make_device_passes(const float* d_g, std::uint64_t n,
                                                        cudaStream_t stream) {
  return std::make_unique<DevicePasses>(d_g, n, stream);
}

}  // namespace gs::kernels::cuda
