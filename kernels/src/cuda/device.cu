// CUDA backend: the CUDA runtime behind the device policy (gs/kernels/device.hpp), gradscope's
// pool memory, copies, error conversion.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_common.cuh"

namespace gs::kernels::cuda {
namespace detail {

void throw_cuda(cudaError_t status, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so later calls start clean
  throw device_error(cudaGetErrorName(status), cudaGetErrorString(status),
                     std::string(expr) + " at " + file + ":" + std::to_string(line));
}

namespace {

// Launched by nothing: whether its attributes load says whether this build has a kernel image
// the device can run (SASS for it, or PTX it can compile).
__global__ void probe_kernel() {}

// The event each thread orders one stream after another with, one per device, made on its first
// use and recorded again at each ordering: a wait takes the event's state when it is queued, so
// recording it again later changes no wait already queued (no event is made in steady state).
class OrderingEvents {
 public:
  OrderingEvents() = default;
  OrderingEvents(const OrderingEvents&) = delete;
  OrderingEvents& operator=(const OrderingEvents&) = delete;
  ~OrderingEvents() {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);  // at thread exit: a failure has no one to tell
  }
  cudaEvent_t on(int device) {
    if (device >= int(events_.size())) events_.resize(std::size_t(device) + 1, nullptr);
    cudaEvent_t& e = events_[std::size_t(device)];
    if (!e) {
      work::event_created();
      GS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    return e;
  }

 private:
  std::vector<cudaEvent_t> events_;
};
thread_local OrderingEvents ordering_events;

class CudaRuntime final : public DeviceRuntime {
 public:
  int device_count() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }
  std::string status() override {
    int count = 0;
    const cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess) {
      cudaGetLastError();
      return std::string("CUDA runtime: ") + cudaGetErrorString(st);
    }
    return std::to_string(count) + " CUDA device(s)";
  }
  DeviceProperties properties(int device) override {
    DeviceProperties p;
    cudaDeviceProp prop{};
    GS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    p.name = prop.name;
    p.major = prop.major;
    p.minor = prop.minor;
    p.multiprocessors = prop.multiProcessorCount;
    int pools = 0;
    GS_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
    p.memory_pools = pools != 0;
    cudaError_t st = cudaSuccess;
    {
      DeviceGuard guard(*this, device);  // the probe asks about the current device
      cudaFuncAttributes attr{};
      st = cudaFuncGetAttributes(&attr, probe_kernel);
    }
    if (st != cudaSuccess) cudaGetLastError();
    if (st != cudaSuccess && st != cudaErrorNoKernelImageForDevice && st != cudaErrorInvalidDeviceFunction)
      throw_cuda(st, "cudaFuncGetAttributes(probe_kernel)", __FILE__, __LINE__);
    p.kernel_image = st == cudaSuccess;
    return p;
  }
  int current_device() override {
    int dev = 0;
    GS_CUDA_CHECK(cudaGetDevice(&dev));
    return dev;
  }
  void set_device(int device) override { GS_CUDA_CHECK(cudaSetDevice(device)); }
  int device_of(const void* p) override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      cudaGetLastError();
      return -1;  // not memory the runtime knows: host memory
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
  }
  StreamHandle create_stream() override {
    cudaStream_t s = nullptr;
    GS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void order_after(StreamHandle waiter, StreamHandle signal) override {
    if (waiter == signal) return;
    const cudaEvent_t ev = ordering_events.on(current_device());
    GS_CUDA_CHECK(cudaEventRecord(ev, static_cast<cudaStream_t>(signal)));
    GS_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), ev, 0));
  }
  void* create_pool(std::uint64_t release_threshold) override {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = current_device();
    cudaMemPool_t pool = nullptr;
    GS_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    GS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &release_threshold));
    return pool;
  }
};

}  // namespace

}  // namespace detail

DevicePolicy& device_policy() {
  // Never destroyed: streams and pools live as long as the process (the runtime tears them down).
  static detail::CudaRuntime* runtime = new detail::CudaRuntime;
  static DevicePolicy* p = new DevicePolicy(*runtime);
  return *p;
}

int device_count() { return detail::policy().runtime().device_count(); }

std::string device_status() { return detail::policy().runtime().status(); }

void* device_allocate(std::size_t bytes, cudaStream_t stream) {
  // gradscope's own pool on the current device (a DeviceScope made the data's device current).
  int dev = 0;
  GS_CUDA_CHECK(cudaGetDevice(&dev));
  auto pool = static_cast<cudaMemPool_t>(detail::policy().pool(dev));
  void* p = nullptr;
  work::allocation();
  GS_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, stream));
  return p;
}

void device_free(void* d_ptr, cudaStream_t stream) noexcept {
  if (d_ptr && cudaFreeAsync(d_ptr, stream) != cudaSuccess) cudaGetLastError();
}

namespace detail {

StagingPool& staging() {
  thread_local StagingPool pool;  // freed at thread exit
  return pool;
}

}  // namespace detail

// Uploads are queued from a pinned block of the thread's staging pool and return at once: the
// block is reused once the copy's event says it is done (the caller's memory may go at once).
void copy_to_device(void* d_dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  add_bus_bytes(bytes);
  detail::StagingLease block(detail::staging(), bytes);
  std::memcpy(block.data(), src, bytes);
  GS_CUDA_CHECK(cudaMemcpyAsync(d_dst, block.data(), bytes, cudaMemcpyHostToDevice, stream));
  block.done_after(stream);
}

// A copy to the host returns once it is done: one blocking synchronization, counted.
void copy_to_host(void* dst, const void* d_src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  add_bus_bytes(bytes);
  detail::StagingLease block(detail::staging(), bytes);
  GS_CUDA_CHECK(cudaMemcpyAsync(block.data(), d_src, bytes, cudaMemcpyDeviceToHost, stream));
  add_host_sync(SyncKind::copy);
  GS_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::memcpy(dst, block.data(), bytes);
}

void synchronize(cudaStream_t stream) {
  add_host_sync(SyncKind::stream);
  GS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gs::kernels::cuda
