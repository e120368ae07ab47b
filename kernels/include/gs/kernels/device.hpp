#pragma once
// How the CUDA backend chooses and uses a device: which backend `auto` and `cuda` give, the device
// of the data (under a guard that restores the caller's), gradscope's own stream per device
// ordered after the caller's stream with events, gradscope's own memory pool per device, and which
// failures are the device's (DeviceError) rather than the caller's or the data's.
//
// The CUDA runtime sits behind DeviceRuntime, so this logic is the same on a GPU (the runtime's
// implementation in kernels/src/cuda/device.cu) and in the tests, which drive it with fake
// devices: no kernel image, no pool support, an out-of-memory, data on device 1 while 0 is
// current. This header needs no CUDA headers.
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::kernels {

// A failure of the device or its runtime (a CUDA or cuFFT status), not a caller mistake nor a
// degenerate vector: callers must let it through (never fall back to another method on it).
// Code that cannot name kernels/ (fitting/) recognises it as its base, gs::DeviceFailure.
class DeviceError : public gs::DeviceFailure {
 public:
  DeviceError(const std::string& what, bool out_of_memory) : gs::DeviceFailure(what), out_of_memory_(out_of_memory) {}
  bool out_of_memory() const { return out_of_memory_; }

 private:
  bool out_of_memory_;
};

// The DeviceError of a runtime status: its name and text (cudaGetErrorName/String), where it
// happened, and for a missing kernel image what to rebuild with.
DeviceError device_error(std::string_view status_name, std::string_view status_text, std::string_view where);

// What the backend needs of a device, read once per device (DevicePolicy caches it).
struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 1;
  bool kernel_image = false;  // this build's kernels load on it (its SASS, or PTX it can compile)
  bool memory_pools = false;  // stream-ordered pools (cudaMemPoolCreate) are supported
};

// A cudaStream_t, or the legacy default stream as nullptr.
using StreamHandle = void*;

// The CUDA runtime calls the policy makes. Failures throw DeviceError.
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual int device_count() = 0;    // 0 without a driver or device; never throws
  virtual std::string status() = 0;  // why device_count() is what it is, in words
  virtual DeviceProperties properties(int device) = 0;
  virtual int current_device() = 0;
  virtual void set_device(int device) = 0;
  // The device whose memory holds p, or -1 for host memory.
  virtual int device_of(const void* p) = 0;
  // A non-blocking stream (no implicit order with the legacy default stream) on the current device.
  virtual StreamHandle create_stream() = 0;
  // `waiter` runs nothing queued after this call before all work queued on `signal` so far is
  // done (an event recorded on signal, waited for on waiter); the host does not wait.
  virtual void order_after(StreamHandle waiter, StreamHandle signal) = 0;
  // A memory pool of the current device that keeps at most release_threshold bytes reserved
  // past a synchronization (cudaMemPoolCreate). The device's default pool is left alone.
  virtual void* create_pool(std::uint64_t release_threshold) = 0;
};

// Makes `device` current for its lifetime (when it is not already), then the previous one again.
class DeviceGuard {
 public:
  DeviceGuard(DeviceRuntime& rt, int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceRuntime& rt_;
  int previous_;  // -1: unchanged
};

// What gradscope's pool keeps reserved past a synchronization (cudaMemPoolAttrReleaseThreshold):
// enough for a 16 Mi-element bucket's scratch to cost no driver allocation from call to call, and
// the rest (peaks of 8n to 16n bytes on larger vectors) goes back for PyTorch and others.
inline constexpr std::uint64_t kPoolReleaseThreshold = std::uint64_t{256} << 20;

// Bytes this thread copied between host and device memory, both ways, since it started: every
// copy of the CUDA backend (and of the cuda-host backend, whose host copies stand for them) adds
// its size. The DDP hook reads it around a bucket (host_device_bytes in its statistics).
std::uint64_t bus_bytes();
void add_bus_bytes(std::uint64_t bytes);

// Blocking synchronizations this thread made since it started: each time the host waited for a
// device (a stream synchronized, an event waited for, a copy to the host that returns once it is
// done). The DDP hook reads it around a bucket (host_syncs in its statistics); the cuda-host
// runtime also counts them per device and kind (cuda_host::syncs_by_device).
enum class SyncKind { stream, event, copy };
std::uint64_t host_syncs();
void add_host_sync(SyncKind kind);

// What this thread queued on devices since it started, as a GPU runs it: kernel launches (memsets
// and device-to-device copies among them, and each kernel a CUB algorithm's dispatch launches), the launches of a
// single thread, allocations (gradscope's device pool and pinned host staging), events created, CUB scratch-size
// queries (the first of CUB's two calls) and the elements its passes went over. The CUDA backend counts what it queues;
// the cuda-host backend counts what the CUDA backend queues for the same calls, so that a step's device cost is counted
// in CI (docs/gpu.md, "What a bucket launches"). The DDP hook reads it around a bucket (StepStats: launches and the
// rest).
struct DeviceWork {
  std::uint64_t launches = 0;
  std::uint64_t single_thread_launches = 0;
  std::uint64_t allocations = 0;
  std::uint64_t events_created = 0;
  std::uint64_t scratch_queries = 0;
  std::uint64_t elements_passed = 0;
  DeviceWork operator-(const DeviceWork& o) const {
    return {launches - o.launches,
            single_thread_launches - o.single_thread_launches,
            allocations - o.allocations,
            events_created - o.events_created,
            scratch_queries - o.scratch_queries,
            elements_passed - o.elements_passed};
  }
};
DeviceWork device_work();
// The cost model of device work (docs/gpu.md, "The cost model"): its launches times the cost of
// one, plus the bytes its passes read (4 an element) over the device's bandwidth. The constants are
// the H200's of commit cdd4df1's GPU run: its read pass took 0.035 ms at 1e7 floats and 0.134 ms at
// 1e8, two launches each (the block reduction and its merge) and a read-back: 3.64 TB/s between the
// two, and 12 us a launch for the fixed rest.
inline constexpr double kModelLaunchMs = 0.012;
inline constexpr int kModelMultiprocessors = 132;  // the H200's SMs: the grid the model's passes run on
inline constexpr double kModelBytesPerMs = 3.64e9;
inline double modelled_ms(std::uint64_t launches, double elements_read) {
  return double(launches) * kModelLaunchMs + 4.0 * elements_read / kModelBytesPerMs;
}
// The counting side (both backends): a kernel of blocks x threads over `elements` elements, a
// memset, an allocation, an event, a CUB algorithm's dispatch (its kernels; its scratch-size query
// is counted by scratch_size, only when this thread has not asked the same before).
namespace work {
void launch(std::uint64_t blocks, std::uint64_t threads, std::uint64_t elements = 0);
void memset();
void copy();  // a device-to-device copy (queued as a memset is)
void allocation();
void event_created();
enum class Cub { reduce, select, histogram, radix_sort };
void cub(Cub algorithm, std::uint64_t items, int key_bits = 32);
// The kernels a CUB dispatch launches for `items` (CCCL 3's dispatch): none for no items; reduce 1
// for an input that fits one tile, else 2 (the pass and its single-tile merge); select and
// histogram 2 (their tile states' or bins' initialisation, then the sweep); radix sort 1 for one
// tile, else 4 + 2 per 8-bit digit pass (onesweep: two memsets, the histogram, its scan; each pass
// a memset and the onesweep kernel).
std::uint64_t cub_kernels(Cub algorithm, std::uint64_t items, int key_bits);
// What sets a CUB dispatch's temporary storage: the algorithm, its items, the key bits of a sort or
// the bins of a histogram, and the bytes of its keys (or inputs) and values.
struct ScratchKey {
  Cub algorithm;
  std::uint64_t items;
  int bits_or_bins;
  int key_bytes;
  int value_bytes = 0;
  auto operator<=>(const ScratchKey&) const = default;
};
// The scratch bytes of `key` this thread was told before, else query() (a CUB size query, counted)
// and remembered (a few thousand keys per thread at most: past that the memory starts again).
std::uint64_t scratch_size(const ScratchKey& key, const std::function<std::uint64_t()>& query);
// A size remembered wrongly (CUB refused it): asked again at the next call.
void forget_scratch_size(const ScratchKey& key);
}  // namespace work

// Blocks of `threads` for a grid-stride pass over n elements on `multiprocessors` SMs: 8 resident
// blocks per SM at most, fixed for a device and n, so block partials merge in the same order.
std::uint64_t grid_blocks(int multiprocessors, std::uint64_t threads, std::uint64_t n);

// The policy over one runtime: cached properties, streams and pools per device, the backend
// choice. Thread-safe.
class DevicePolicy {
 public:
  explicit DevicePolicy(DeviceRuntime& runtime) : rt_(runtime) {}
  DeviceRuntime& runtime() { return rt_; }

  const DeviceProperties& properties(int device);
  // Empty when the kernels run on the device with gradscope's pool; else why not, in words.
  std::string unusable_reason(int device);
  // gradscope's stream and pool on the device (made on first use, under a device guard).
  StreamHandle stream(int device);
  void* pool(int device);

  // `auto`: cuda when `device` (-1: the current one) is usable, else cpu (the first time with a
  // warning, when a device is present but cannot run the kernels). `cuda`: cuda, or gs::Error
  // saying why not. Only `device` is asked about (the runtime holds a context on it after).
  struct Choice {
    BackendKind kind = BackendKind::cpu;
    std::string warning;  // non-empty once per policy: print it
  };
  Choice choose(std::string_view name, int device = -1);

 private:
  struct PerDevice {
    DeviceProperties props;
    StreamHandle stream = nullptr;
    void* pool = nullptr;
    bool has_stream = false;
  };
  PerDevice& slot(int device);  // holds mu_
  void check_device(int device);

  DeviceRuntime& rt_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<PerDevice>> devices_;
  bool warned_ = false;
};

// Within its lifetime, the CUDA backend's calls on this thread order themselves after `stream` on
// `device` (host data is staged there) instead of the stream their Selector was made with: what
// the Python package sets around a call with torch's current stream of the tensor's device.
class CallerStream {
 public:
  CallerStream(int device, StreamHandle stream);
  ~CallerStream();
  CallerStream(const CallerStream&) = delete;
  CallerStream& operator=(const CallerStream&) = delete;
  // The innermost one on this thread, or null.
  static const CallerStream* current();
  int device() const { return device_; }
  StreamHandle stream() const { return stream_; }

 private:
  int device_;
  StreamHandle stream_;
  const CallerStream* outer_;
};

// One entry point's stay on a device: the device of `data` (host data or null: the CallerStream's
// device, else the current one) made current, gradscope's stream there ordered after the caller's
// (the CallerStream's, else `caller`). On leaving, the caller's stream is ordered after gradscope's
// and the previous device is current again. Only gradscope's stream is ever synchronized. Host data
// (or none) with neither a CallerStream nor a caller stream is ordered after no stream: nothing on
// a stream produced it, and the legacy default stream, which would then stand for the caller's,
// is a barrier for every blocking stream of the device (PyTorch's among them).
class DeviceScope {
 public:
  DeviceScope(DevicePolicy& policy, const void* data, StreamHandle caller);
  ~DeviceScope() noexcept(false);  // throws a DeviceError only when no exception is in flight
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  int device() const { return device_; }
  StreamHandle stream() const { return stream_; }
  const DeviceProperties& properties() const { return *props_; }

 private:
  DevicePolicy& policy_;
  int device_ = 0;
  int previous_ = -1;  // the device to make current again, or -1 when it did not change
  StreamHandle caller_ = nullptr;
  bool ordered_ = true;  // whether the work is ordered after the caller's stream (and it after the work)
  StreamHandle stream_ = nullptr;
  const DeviceProperties* props_ = nullptr;
  int exceptions_ = 0;
};

}  // namespace gs::kernels
