#pragma once
// CUDA backend (built with GS_ENABLE_CUDA): the operations of gs/kernels/cpu.hpp over device
// memory. Device pointers are d_-prefixed and the caller's stream is the last parameter (null: the
// legacy default stream). Every entry point runs on the device of its data (found from the
// pointer's attributes; that device is made current for the call and the caller's again after),
// on gradscope's own stream there, ordered after the caller's stream with an event; on return the
// caller's stream is ordered after that work, so what the caller queues next sees the results.
// Functions that return a host value (a count, statistics) synchronize gradscope's stream only;
// the others only enqueue. Memory comes from gradscope's own pool (gs/kernels/device.hpp). Every
// CUDA status is checked and a failure throws DeviceError (never aborts).
// The same selection rule, ln approximation and hashes as the CPU backend (gs/kernels/elementwise.hpp),
// so both backends select and sample the same elements, and bin them the same but for an element
// within an ulp of a bin edge (CUDA's double log is within 1 ulp, like glibc's, but not always
// equal to it: the numerical policy in docs/architecture.md). This header needs no CUDA headers.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gs/base/error.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"
#include "gs/kernels/types.hpp"
#include "gs/kernels/vector_ops.hpp"

struct CUstream_st;
using cudaStream_t = CUstream_st*;  // the CUDA runtime's own definition, repeated

namespace gs::kernels {
class RealFft;
}

namespace gs::kernels::cuda {

// The device policy over the CUDA runtime (one per process): properties, streams and pools per
// device, the backend choice.
DevicePolicy& device_policy();

// Number of CUDA devices (0 without a driver or GPU; never throws).
int device_count();
// Why device_count() is what it is, in words (for error messages).
std::string device_status();

// Device memory from gradscope's pool of the current device (cudaMallocFromPoolAsync): freeing
// returns it to the pool, which keeps up to kPoolReleaseThreshold bytes past a synchronization,
// so the two-phase CUB temp storage and scratch buffers cost no driver allocation after warm-up.
void* device_allocate(std::size_t bytes, cudaStream_t stream);
void device_free(void* d_ptr, cudaStream_t stream) noexcept;
void copy_to_device(void* d_dst, const void* src, std::size_t bytes, cudaStream_t stream);
void copy_to_host(void* dst, const void* d_src, std::size_t bytes, cudaStream_t stream);
void synchronize(cudaStream_t stream);

// Owning device array of T, freed on destruction (stream-ordered on the stream it was made on).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t count, cudaStream_t stream)
      : data_(static_cast<T*>(count ? device_allocate(count * sizeof(T), stream) : nullptr)),
        size_(count),
        stream_(stream) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), size_(o.size_), stream_(o.stream_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = o.data_;
      size_ = o.size_;
      stream_ = o.stream_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  void reset() noexcept {
    if (data_) device_free(data_, stream_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  cudaStream_t stream() const { return stream_; }
  void upload(std::span<const T> host) {
    if (host.size() > size_) throw gs::Error("DeviceBuffer::upload: more elements than the buffer holds");
    copy_to_device(data_, host.data(), host.size_bytes(), stream_);
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    copy_to_host(host.data(), data_, size_ * sizeof(T), stream_);
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
};

// One plain read pass (sum of g): the baseline benchmarks divide by. passes: 1.
double sum(const float* d_g, std::uint64_t n, cudaStream_t stream);
// Fused statistics of x = |g|: one kernel, block reduction of MagnitudeStats. passes: 1.
fitting::MagnitudeStats stats(const float* d_g, std::uint64_t n, cudaStream_t stream);
fitting::MagnitudeStats stats_above(const float* d_g, std::uint64_t n, double threshold, double shift,
                                    cudaStream_t stream);
std::uint64_t count_above(const float* d_g, std::uint64_t n, double threshold, cudaStream_t stream);
fitting::GpSums gp_sums(const float* d_g, std::uint64_t n, double theta, double threshold, double shift,
                        cudaStream_t stream);

// Compaction above a threshold (cub::DeviceSelect, stable: indices ascending) into caller device
// buffers of `capacity` elements, plus the signed values (d_values may be null). Returns the count.
// The selection's store drops what lands past capacity, so nothing is written past it; a selection
// larger than capacity throws gs::Error (no values written). passes: 1 (+ a gather of the
// selected values).
std::uint64_t compact_above(const float* d_g, std::uint64_t n, double threshold, std::int32_t* d_indices,
                            float* d_values, std::uint64_t capacity, cudaStream_t stream);
std::uint64_t compact_above(const float* d_g, std::uint64_t n, double threshold, std::int64_t* d_indices,
                            float* d_values, std::uint64_t capacity, cudaStream_t stream);

// Exact top-k by magnitude: exactly k indices (ascending) and values into buffers of at least k.
// Radix select: pass 1 histograms the top 11 bits of |g| (cub::DeviceHistogram); pass 2 selects
// the threshold bin's candidates (cub::DeviceSelect) and their low bits are resolved over the
// candidates only; pass 3 selects key > T, plus the lowest-index ties. passes: 3.
void topk(const float* d_g, std::uint64_t n, std::uint64_t k, std::int32_t* d_indices, float* d_values,
          cudaStream_t stream);
void topk(const float* d_g, std::uint64_t n, std::uint64_t k, std::int64_t* d_indices, float* d_values,
          cudaStream_t stream);
// The k-th largest finite |g|. passes: 2.
float kth_largest(const float* d_g, std::uint64_t n, std::uint64_t k, cudaStream_t stream);
// sidco-topk (as cpu::sidco_topk, the same set as topk): the spread sample places the bound, one
// cub::DeviceSelect packs the candidates, a stable descending radix sort of their keys picks the
// min(k, finite) largest, whose indices are sorted back. Only the selection is copied to the host
// (out); nonfinite is not counted. passes: 1 + a sample (+1 per fallback, +1 to count the finite
// values after a shortfall).
SidcoSelectResult sidco_topk(const float* d_g, std::uint64_t n, double density, int stages,
                             Selection<std::int32_t>& out, cudaStream_t stream);

LogHistogram log_histogram(const float* d_g, std::uint64_t n, double lo, double hi, int bins, cudaStream_t stream);
// As cpu::sorted_sample (same elements for the same seed); sorts with cub::DeviceRadixSort.
std::vector<double> sorted_sample(const float* d_g, std::uint64_t n, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled, cudaStream_t stream);
// As cpu::random_sample, written to d_out (m floats).
void random_sample(const float* d_g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* d_out,
                   cudaStream_t stream);

// gs::MagnitudePasses over a device copy of host data (one upload, every pass on the GPU).
std::unique_ptr<gs::fitting::MagnitudePasses> make_device_passes(std::span<const float> host_data);
// The same over data already on the device (not owned; must outlive the object).
std::unique_ptr<gs::fitting::MagnitudePasses> make_device_passes(const float* d_g, std::uint64_t n,
                                                                 cudaStream_t stream);

// The Selector of this backend over `stream` (use gs::kernels::make_selector, which checks for a
// GPU first).
std::unique_ptr<Selector> make_selector(cudaStream_t stream);

// The VectorOps of gs/kernels/vector_ops.hpp on `device` (use gs::kernels::make_vector_ops).
std::unique_ptr<VectorOps> make_vector_ops(int device);

// The cuFFT engine of gs/kernels/fft.hpp (use gs::kernels::make_real_fft, which checks for a GPU
// first): one plan per (length, batch, direction), its own stream, pooled device buffers.
std::unique_ptr<RealFft> make_real_fft();

}  // namespace gs::kernels::cuda
