#pragma once
// Device failures without a device: the cuda-host backend fails an allocation as a device out of
// memory would (gs::kernels::cuda_host::fail_allocation_after), so tests can check that callers let
// the failure through, at every place it can happen.
#include <cstdint>
#include <functional>

#include "gs/base/error.hpp"
#include "gs/kernels/cuda_host.hpp"

namespace gs::testing {

// Injects one out-of-memory after `after` more cuda-host allocations, for its lifetime.
struct InjectedOutOfMemory {
  explicit InjectedOutOfMemory(std::int64_t after) { kernels::cuda_host::fail_allocation_after(after); }
  ~InjectedOutOfMemory() { kernels::cuda_host::fail_allocation_after(-1); }
  InjectedOutOfMemory(const InjectedOutOfMemory&) = delete;
  InjectedOutOfMemory& operator=(const InjectedOutOfMemory&) = delete;
};

// The cuda-host allocations fn makes: the fewest after which an injected failure no longer
// happens (fn throws no gs::DeviceFailure), found by bisection. So a test can put the failure at
// every part of fn, whatever the backend's allocations are today. fn must let device failures
// through (where it would not, the count found is where the first one was swallowed).
inline std::int64_t cuda_host_allocations(const std::function<void()>& fn) {
  auto completes = [&](std::int64_t after) {
    InjectedOutOfMemory oom(after);
    try {
      fn();
      return true;
    } catch (const DeviceFailure&) {
      return false;
    }
  };
  if (completes(0)) return 0;
  std::int64_t fails = 0, passes = 1;
  while (!completes(passes)) {
    fails = passes;
    passes *= 2;
  }
  while (passes - fails > 1) {
    const std::int64_t mid = fails + (passes - fails) / 2;
    (completes(mid) ? passes : fails) = mid;
  }
  return passes;
}

}  // namespace gs::testing
