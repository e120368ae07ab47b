#pragma once
// The `cuda-host` backend: the CUDA backend's pass code (kernels/src/portable/) compiled for the
// host, over host memory, single-threaded. Every function here runs exactly the logic its
// gs::kernels::cuda twin runs on a GPU (the same selection, radix top-k, samples and sidco-topk,
// the hand-written kernels' per-thread bodies over the grid a small GPU would launch), so tests
// check that logic against the naive oracle and the CPU backend on machines without a GPU. It is
// for checking, not for speed: use the CPU backend for work.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "gs/fitting/passes.hpp"
#include "gs/kernels/device.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/kernels/select.hpp"
#include "gs/kernels/types.hpp"
#include "gs/kernels/vector_ops.hpp"

namespace gs::kernels::cuda_host {

// The SMs of the device whose grid the cuda-host backend runs its kernels' twins on (2 unless set):
// a grid sets which block reads which chunk, so what a pass reads may depend on it (select_then
// reads a chunk again where its hits overflow a block's room). The kernel benchmark sets the cost
// model's device's (kModelMultiprocessors). Process-wide; set it before the backend's first call.
void set_multiprocessors(int sms);
int multiprocessors();

double sum(const float* g, std::uint64_t n);
fitting::MagnitudeStats stats(const float* g, std::uint64_t n);
fitting::MagnitudeStats stats_above(const float* g, std::uint64_t n, double threshold, double shift);
std::uint64_t count_above(const float* g, std::uint64_t n, double threshold);
fitting::GpSums gp_sums(const float* g, std::uint64_t n, double theta, double threshold, double shift);
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int32_t* indices, float* values,
                            std::uint64_t capacity);
std::uint64_t compact_above(const float* g, std::uint64_t n, double threshold, std::int64_t* indices, float* values,
                            std::uint64_t capacity);
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int32_t* indices, float* values);
void topk(const float* g, std::uint64_t n, std::uint64_t k, std::int64_t* indices, float* values);
float kth_largest(const float* g, std::uint64_t n, std::uint64_t k);
SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages, Selection<std::int32_t>& out);
LogHistogram log_histogram(const float* g, std::uint64_t n, double lo, double hi, int bins);
std::vector<double> sorted_sample(const float* g, std::uint64_t n, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled);
void random_sample(const float* g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* out);

// gs::MagnitudePasses over a copy of host data (the copy stands for the device upload).
std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(std::span<const float> host_data);
// The same over data in place (not owned; must outlive the object).
std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(const float* g, std::uint64_t n);

// The Selector of this backend (make_selector(BackendKind::cuda_host)).
std::unique_ptr<Selector> make_selector();
// Its VectorOps on fake device `device` (make_vector_ops(BackendKind::cuda_host, device)).
std::unique_ptr<VectorOps> make_vector_ops(int device);

// The backend's devices: kHostDevices fake devices over host memory, behind the same device
// policy as CUDA's (gs/kernels/device.hpp), so the calls of the Selector, the passes and the
// vector operations (make_selector, make_passes, make_vector_ops with BackendKind::cuda_host) run
// on the device of their data, with each thread's current device starting at 0 as on a GPU.
// Memory the backend allocates belongs to the device current on the allocating thread.
inline constexpr int kHostDevices = 16;
DevicePolicy& device_policy();

// Declares [data, data + bytes) memory of fake device `device` for the object's lifetime: host
// memory standing for a tensor on that device (the DDP hook's cuda-host buckets).
class DeviceMemory {
 public:
  DeviceMemory(const void* data, std::size_t bytes, int device);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

 private:
  const void* data_;
};

// Work done on each fake device (allocations, copies, launches' stand-ins, streams, pools,
// pointer queries: each counted against the device current on the thread that did it), since the
// process started or the last reset; devices with none are left out. Tests read it to see that
// work lands on the device of its data and nowhere else.
std::map<int, std::uint64_t> work_by_device();
// Orderings with the legacy default stream (a null stream on either side) since the last reset.
std::uint64_t legacy_stream_orders();
void reset_work_by_device();  // and the count of legacy orderings and of synchronizations
// Blocking synchronizations made on each fake device since the last reset, by kind: the stream
// synchronizations, event waits and copies to the host that return once done (a value read back)
// the CUDA backend's calls would make on a GPU. Devices with none are left out.
struct SyncCounts {
  std::uint64_t stream = 0, event = 0, copy = 0;
  std::uint64_t total() const { return stream + event + copy; }
};
std::map<int, SyncCounts> syncs_by_device();
// With lag on, the fake devices run behind the host as a GPU does: work queued (a copy, an
// event) is done only after a synchronization since, so what waits for an event, or passes over
// a pinned block still in flight, is exercised. Off (the default), queued work is done at once.
void set_device_lag(bool on);
// Pinned staging blocks this thread's cuda-host copies made or grew (each is an allocation of
// pinned memory on a GPU); tests of their reuse read it.
std::uint64_t staging_allocations();
// A stream of the caller's on `device` (what torch's current stream is for a CUDA tensor): work
// is ordered after it and it after the work, as on a GPU; recording on it with another device
// current is an error, as in CUDA.
StreamHandle caller_stream(int device);

// For tests of how callers treat device errors: after `allocations` more allocations of this
// backend, the next one throws the DeviceError a device out of memory gives (once; -1 cancels).
void fail_allocation_after(std::int64_t allocations);
// Bytes this backend allocated since the process started (tests of its workspaces).
std::uint64_t allocated_bytes();
// Allocations of CUB's temporary storage the CUDA backend's calls would make (modelled: one per
// call without a workspace, one per growth of a Selector's), since the process started.
std::uint64_t scratch_allocations();

}  // namespace gs::kernels::cuda_host
