#pragma once
// Private helpers of the CUDA backend: status checks that throw DeviceError, the device policy
// over the CUDA runtime, the pool-backed two-phase CUB temp-storage call.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gs/base/error.hpp"
#include "gs/kernels/cuda.hpp"
#include "gs/kernels/device.hpp"
#include "../staging_pool.hpp"

namespace gs::kernels::cuda::detail {

// A failed status as DeviceError (gs/kernels/device.hpp: device_error), with the call and place.
[[noreturn]] void throw_cuda(cudaError_t status, const char* expr, const char* file, int line);

inline DevicePolicy& policy() { return device_policy(); }

}  // namespace gs::kernels::cuda::detail

// Checks a CUDA status; a failure becomes DeviceError naming the call, the place and the reason.
#define GS_CUDA_CHECK(expr)                                                                                        \
  do {                                                                                                             \
    const cudaError_t gs_status_ = (expr);                                                                         \
    if (gs_status_ != cudaSuccess) ::gs::kernels::cuda::detail::throw_cuda(gs_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors now, execution errors at the next synchronizing call.
#define GS_CUDA_CHECK_LAUNCH() GS_CUDA_CHECK(cudaGetLastError())

namespace gs::kernels::cuda::detail {

inline constexpr int kThreads = 256;

// CUB's two-phase calls through one function: the first call sizes the temp storage, the second
// runs. The storage is `scratch` when given (a workspace its owner keeps between calls, grown
// here when too small), else a buffer of the stream-ordered pool for this call.
// `call(void* temp, size_t& bytes)` returns the cudaError_t of the CUB algorithm.
// The size comes from CUB's first call once per `key` and thread (work::scratch_size); a size CUB
// refuses (cudaErrorInvalidValue: too small, which it says before launching anything) is asked
// again and the call repeated.
template <class Call>
void cub_run(const work::ScratchKey& key, Call call, cudaStream_t stream,
             DeviceBuffer<unsigned char>* scratch = nullptr) {
  const auto query = [&] {
    std::size_t b = 0;
    GS_CUDA_CHECK(call(nullptr, b));
    return std::uint64_t(b);
  };
  const auto run = [&](std::size_t bytes) {
    if (scratch) {
      if (scratch->size() < bytes) *scratch = DeviceBuffer<unsigned char>(std::max(bytes, 2 * scratch->size()), stream);
      return call(static_cast<void*>(scratch->data()), bytes);
    }
    DeviceBuffer<unsigned char> temp(bytes > 0 ? bytes : 1, stream);
    return call(static_cast<void*>(temp.data()), bytes);
  };
  cudaError_t st = run(std::size_t(work::scratch_size(key, query)));
  if (st == cudaErrorInvalidValue) {
    cudaGetLastError();
    work::forget_scratch_size(key);
    st = run(std::size_t(work::scratch_size(key, query)));
  }
  GS_CUDA_CHECK(st);
}

// The StagingPool's host side on a GPU: pinned, mapped host memory (a kernel may write into it
// through its device address, which UVA makes its host address) and events of the current device.
struct CudaStaging {
  struct Event {
    cudaEvent_t e = nullptr;
    int device = -1;
  };
  void* alloc(std::size_t bytes) const {
    void* p = nullptr;
    work::allocation();
    GS_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    return p;
  }
  void free(void* p) const {
    if (p) cudaFreeHost(p);  // a failure here has no one to tell
  }
  void record(Event& ev, StreamHandle stream) const {
    int dev = 0;
    GS_CUDA_CHECK(cudaGetDevice(&dev));
    if (ev.e && ev.device != dev) destroy(ev);  // an event records on its own device's streams only
    if (!ev.e) {
      work::event_created();
      GS_CUDA_CHECK(cudaEventCreateWithFlags(&ev.e, cudaEventDisableTiming));
      ev.device = dev;
    }
    GS_CUDA_CHECK(cudaEventRecord(ev.e, static_cast<cudaStream_t>(stream)));
  }
  bool done(const Event& ev) const {
    if (!ev.e) return true;
    const cudaError_t st = cudaEventQuery(ev.e);
    if (st == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    GS_CUDA_CHECK(st);
    return true;
  }
  void wait(const Event& ev) const {
    if (!ev.e) return;
    add_host_sync(SyncKind::event);
    GS_CUDA_CHECK(cudaEventSynchronize(ev.e));
  }
  void destroy(Event& ev) const {
    if (ev.e) cudaEventDestroy(ev.e);
    ev = {};
  }
};

// The calling thread's pinned staging blocks (device.cu).
using StagingPool = kernels::detail::StagingPool<CudaStaging>;
using StagingLease = kernels::detail::StagingLease<StagingPool>;
StagingPool& staging();

// Reads one value back (synchronizes the stream).
template <class T>
T read_back(const T* d_value, cudaStream_t stream) {
  T host{};
  copy_to_host(&host, d_value, sizeof(T), stream);
  return host;
}

}  // namespace gs::kernels::cuda::detail
