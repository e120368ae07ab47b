#pragma once
// cuda-host's pinned staging: the StagingPool of the CUDA backend (staging_pool.hpp) over host
// memory and the runtime's modelled events, one pool per thread as on a GPU, so the reuse rule
// (a block in flight is passed over, never waited for) runs in the tests.
#include <cstddef>
#include <cstdint>

#include "../staging_pool.hpp"
#include "runtime.hpp"

namespace gs::kernels::cuda_host {

struct HostStaging {
  using Event = std::uint64_t;  // 0: none recorded
  void* alloc(std::size_t bytes) const {
    work::allocation();  // cudaHostAlloc's
    return new unsigned char[bytes];
  }
  void free(void* p) const { delete[] static_cast<unsigned char*>(p); }
  void record(Event& e, StreamHandle) const {
    if (e == 0) work::event_created();  // a block's event is made at its first record, then reused
    e = runtime().record_event();
  }
  bool done(const Event& e) const { return e == 0 || runtime().event_done(e); }
  void wait(const Event& e) const { runtime().wait_event(e); }
  void destroy(Event&) const {}
};

using StagingPool = kernels::detail::StagingPool<HostStaging>;
using StagingLease = kernels::detail::StagingLease<StagingPool>;
// This thread's pool.
StagingPool& staging();

}  // namespace gs::kernels::cuda_host
