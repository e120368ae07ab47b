// The CUDA backend's device policy (gs/kernels/device.hpp), over any DeviceRuntime: the CUDA
// runtime on a GPU, fake devices in the tests.
#include "gs/kernels/device.hpp"

#include <algorithm>
#include <exception>

namespace gs::kernels {

DeviceError device_error(std::string_view status_name, std::string_view status_text, std::string_view where) {
  std::string msg =
      "CUDA error: " + std::string(status_name) + " (" + std::string(status_text) + ") in " + std::string(where);
  if (status_name == "cudaErrorNoKernelImageForDevice" || status_name == "cudaErrorInvalidDeviceFunction")
    msg +=
        "; this build has no kernel for the device: rebuild with its architecture in "
        "CMAKE_CUDA_ARCHITECTURES, or use --backend cpu";
  return DeviceError(msg, status_name == "cudaErrorMemoryAllocation");
}

std::uint64_t grid_blocks(int multiprocessors, std::uint64_t threads, std::uint64_t n) {
  const std::uint64_t needed = (n + threads - 1) / threads;
  const std::uint64_t cap = static_cast<std::uint64_t>(std::max(multiprocessors, 1)) * 8;
  return std::max<std::uint64_t>(1, std::min(needed, cap));
}

DeviceGuard::DeviceGuard(DeviceRuntime& rt, int device) : rt_(rt), previous_(rt.current_device()) {
  if (previous_ != device)
    rt_.set_device(device);
  else
    previous_ = -1;
}
DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  try {
    rt_.set_device(previous_);
  } catch (...) {  // it was current a moment ago; a destructor has no one to tell
  }
}

namespace {

std::string capability(const DeviceProperties& p) { return std::to_string(p.major) + "." + std::to_string(p.minor); }

}  // namespace

void DevicePolicy::check_device(int device) {
  const int count = rt_.device_count();
  if (device < 0 || device >= count)
    throw gs::Error("CUDA backend: device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                    " visible: " + rt_.status() + ")");
}

DevicePolicy::PerDevice& DevicePolicy::slot(int device) {
  auto& s = devices_[device];
  if (!s) {
    check_device(device);
    auto fresh = std::make_unique<PerDevice>();
    fresh->props = rt_.properties(device);
    s = std::move(fresh);
  }
  return *s;
}

const DeviceProperties& DevicePolicy::properties(int device) {
  std::lock_guard lock(mu_);
  return slot(device).props;
}

std::string DevicePolicy::unusable_reason(int device) {
  const DeviceProperties& p = properties(device);
  const std::string which =
      "device " + std::to_string(device) + " (" + p.name + ", compute capability " + capability(p) + ")";
  if (!p.kernel_image)
    return which + " cannot run this build's kernels (no kernel image for it: rebuild with " +
           std::to_string(p.major * 10 + p.minor) + " in CMAKE_CUDA_ARCHITECTURES)";
  if (!p.memory_pools)
    return which + " has no stream-ordered memory pools (cudaMemPoolCreate), which the CUDA backend allocates from";
  return {};
}

StreamHandle DevicePolicy::stream(int device) {
  std::lock_guard lock(mu_);
  PerDevice& s = slot(device);
  if (!s.has_stream) {
    DeviceGuard guard(rt_, device);
    s.stream = rt_.create_stream();
    s.has_stream = true;
  }
  return s.stream;
}

void* DevicePolicy::pool(int device) {
  std::lock_guard lock(mu_);
  PerDevice& s = slot(device);
  if (!s.pool) {
    if (!s.props.memory_pools)
      throw gs::Error("CUDA backend: device " + std::to_string(device) + " has no stream-ordered memory pools");
    DeviceGuard guard(rt_, device);
    s.pool = rt_.create_pool(kPoolReleaseThreshold);
  }
  return s.pool;
}

DevicePolicy::Choice DevicePolicy::choose(std::string_view name, int device) {
  if (name != "auto" && name != "cuda")
    throw gs::Error("DevicePolicy::choose: '" + std::string(name) + "' is neither auto nor cuda");
  Choice c;
  if (rt_.device_count() == 0) {
    if (name == "cuda")
      throw gs::Error("backend 'cuda': no usable GPU (" + rt_.status() + "); use --backend cpu or auto");
    return c;  // no device at all: the CPU, as expected, without a warning
  }
  const std::string why = unusable_reason(device >= 0 ? device : rt_.current_device());
  if (why.empty()) {
    c.kind = BackendKind::cuda;
    return c;
  }
  if (name == "cuda") throw gs::Error("backend 'cuda': " + why + "; use --backend cpu or auto");
  std::lock_guard lock(mu_);
  if (!warned_) c.warning = "backend auto: " + why + "; using the CPU backend";
  warned_ = true;
  return c;
}

namespace {
thread_local const CallerStream* innermost = nullptr;
thread_local std::uint64_t bus_bytes_here = 0;
thread_local std::uint64_t host_syncs_here = 0;
}  // namespace

namespace {
thread_local DeviceWork work_here;
}  // namespace

DeviceWork device_work() { return work_here; }

namespace work {
void launch(std::uint64_t blocks, std::uint64_t threads, std::uint64_t elements) {
  ++work_here.launches;
  if (blocks * threads == 1) ++work_here.single_thread_launches;
  work_here.elements_passed += elements;
}
void memset() { ++work_here.launches; }
void copy() { ++work_here.launches; }
void allocation() { ++work_here.allocations; }
void event_created() { ++work_here.events_created; }
std::uint64_t cub_kernels(Cub algorithm, std::uint64_t items, int key_bits) {
  if (items == 0) return 0;  // the dispatch returns before any kernel
  // Tiles of the sm_75 to sm_90 policies of CCCL 3.0: 256 threads of 16 items for the reduction,
  // 256 x 8 for the radix sort's single-tile kernel.
  switch (algorithm) {
    case Cub::reduce:
      return items <= 256 * 16 ? 1 : 2;  // one tile, or the pass and its merge
    case Cub::select:
    case Cub::histogram:
      return 2;  // the tile states' (the bins') initialisation, then the sweep
    case Cub::radix_sort:
      return items <= 256 * 8 ? 1 : 4 + 2 * std::uint64_t((key_bits + 7) / 8);
  }
  return 0;
}
void cub(Cub algorithm, std::uint64_t items, int key_bits) {
  work_here.launches += cub_kernels(algorithm, items, key_bits);
  work_here.elements_passed += items;
}
namespace {
constexpr std::size_t kScratchSizesKept = 4096;
thread_local std::map<ScratchKey, std::uint64_t> scratch_sizes;
}  // namespace
std::uint64_t scratch_size(const ScratchKey& key, const std::function<std::uint64_t()>& query) {
  if (const auto it = scratch_sizes.find(key); it != scratch_sizes.end()) return it->second;
  ++work_here.scratch_queries;
  const std::uint64_t bytes = query();
  if (scratch_sizes.size() >= kScratchSizesKept) scratch_sizes.clear();
  scratch_sizes.emplace(key, bytes);
  return bytes;
}
void forget_scratch_size(const ScratchKey& key) { scratch_sizes.erase(key); }
}  // namespace work

std::uint64_t bus_bytes() { return bus_bytes_here; }
void add_bus_bytes(std::uint64_t bytes) { bus_bytes_here += bytes; }
std::uint64_t host_syncs() { return host_syncs_here; }
void add_host_sync(SyncKind) { ++host_syncs_here; }

CallerStream::CallerStream(int device, StreamHandle stream) : device_(device), stream_(stream), outer_(innermost) {
  innermost = this;
}
CallerStream::~CallerStream() { innermost = outer_; }
const CallerStream* CallerStream::current() { return innermost; }

DeviceScope::DeviceScope(DevicePolicy& policy, const void* data, StreamHandle caller) : policy_(policy) {
  DeviceRuntime& rt = policy.runtime();
  const CallerStream* cs = CallerStream::current();
  const int data_device = data ? rt.device_of(data) : -1;
  if (cs && cs->device() >= 0 && data_device >= 0 && cs->device() != data_device)
    throw gs::Error("CUDA backend: the data is on device " + std::to_string(data_device) +
                    " but the caller's stream is on device " + std::to_string(cs->device()) +
                    "; pass the stream of the data's device");
  device_ = data_device >= 0 ? data_device : (cs && cs->device() >= 0 ? cs->device() : rt.current_device());
  if (const std::string why = policy.unusable_reason(device_); !why.empty())
    throw gs::Error("CUDA backend: " + why + "; use --backend cpu");
  props_ = &policy.properties(device_);
  stream_ = policy.stream(device_);
  caller_ = cs ? cs->stream() : caller;
  ordered_ = caller_ != nullptr || data_device >= 0;  // host data from no stream: no barrier
  const int current = rt.current_device();
  if (current != device_) {
    rt.set_device(device_);
    previous_ = current;
  }
  try {
    if (ordered_) rt.order_after(stream_, caller_);
  } catch (...) {
    if (previous_ >= 0) rt.set_device(previous_);
    throw;
  }
  exceptions_ = std::uncaught_exceptions();
}

DeviceScope::~DeviceScope() noexcept(false) {
  DeviceRuntime& rt = policy_.runtime();
  std::exception_ptr failure;
  try {
    if (ordered_) rt.order_after(caller_, stream_);  // what the caller queues next sees the results
  } catch (...) {
    failure = std::current_exception();
  }
  if (previous_ >= 0) {
    try {
      rt.set_device(previous_);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure && std::uncaught_exceptions() == exceptions_) std::rethrow_exception(failure);
}

}  // namespace gs::kernels
