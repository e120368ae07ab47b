#pragma once
// Private helpers of the CUDA backend: status checks that throw DeviceError, the device policy
// over the CUDA runtime, the pool-backed two-phase CUB temp-storage call.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gs/error.hpp"
#include "gs/kernels/cuda.hpp"
#include "gs/kernels/device.hpp"

namespace gs::kernels::cuda::detail {

// A failed status as DeviceError (gs/kernels/device.hpp: device_error), with the call and place.
[[noreturn]] void throw_cuda(cudaError_t status, const char* expr, const char* file, int line);

inline DevicePolicy& policy() { return device_policy(); }

}  // namespace gs::kernels::cuda::detail

// Checks a CUDA status; a failure becomes DeviceError naming the call, the place and the reason.
#define GS_CUDA_CHECK(expr)                                                        \
  do {                                                                             \
    const cudaError_t gs_status_ = (expr);                                         \
    if (gs_status_ != cudaSuccess)                                                 \
      ::gs::kernels::cuda::detail::throw_cuda(gs_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors now, execution errors at the next synchronizing call.
#define GS_CUDA_CHECK_LAUNCH() GS_CUDA_CHECK(cudaGetLastError())

namespace gs::kernels::cuda::detail {

inline constexpr int kThreads = 256;

// CUB's two-phase calls through one function: the first call sizes the temp storage, which comes
// from the stream-ordered pool (DeviceBuffer), the second runs. `call(void* temp, size_t& bytes)`
// returns the cudaError_t of the CUB algorithm.
template <class Call>
void cub_run(Call call, cudaStream_t stream) {
  std::size_t bytes = 0;
  GS_CUDA_CHECK(call(nullptr, bytes));
  DeviceBuffer<unsigned char> temp(bytes > 0 ? bytes : 1, stream);
  GS_CUDA_CHECK(call(static_cast<void*>(temp.data()), bytes));
}

// Reads one value back (synchronizes the stream).
template <class T>
T read_back(const T* d_value, cudaStream_t stream) {
  T host{};
  copy_to_host(&host, d_value, sizeof(T), stream);
  return host;
}

}  // namespace gs::kernels::cuda::detail
