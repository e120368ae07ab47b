// The cuda-host backend's fake devices (runtime.hpp), and the cuda_host entry points over them.
#include "runtime.hpp"

#include <atomic>
#include <string>

#include "gs/base/error.hpp"
#include "gs/kernels/cuda_host.hpp"

#include "staging.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace gs::kernels::cuda_host {

namespace {

// gradscope's stream of device d stands as this handle, a caller's (caller_stream) as the
// other (never null: null is the legacy stream).
constexpr std::uintptr_t kStreamBase = 0x5000, kCallerBase = 0x6000;
int device_of_stream(StreamHandle s) {
  const auto v = reinterpret_cast<std::uintptr_t>(s);
  if (v >= kStreamBase && v < kStreamBase + kHostDevices) return int(v - kStreamBase);
  if (v >= kCallerBase && v < kCallerBase + kHostDevices) return int(v - kCallerBase);
  return -1;
}

}  // namespace

namespace {
std::atomic<int> emulated_sms{2};
}  // namespace

void set_multiprocessors(int sms) {
  if (sms < 1) throw gs::Error("cuda-host: a device has at least one multiprocessor (got " + std::to_string(sms) + ")");
  emulated_sms = sms;
}
int multiprocessors() { return emulated_sms; }

thread_local int HostRuntime::current_ = 0;

DeviceProperties HostRuntime::properties(int device) {
  DeviceProperties p;
  p.name = "cuda-host device " + std::to_string(device);
  p.major = 9;
  p.minor = 0;
  p.multiprocessors = multiprocessors();  // the grid HostPrims emulates
  p.kernel_image = true;
  p.memory_pools = true;
  return p;
}

void HostRuntime::set_device(int device) {
  if (device < 0 || device >= kHostDevices)
    throw device_error("cudaErrorInvalidDevice", "invalid device ordinal",
                       "cudaSetDevice(" + std::to_string(device) + ") on the cuda-host runtime");
  current_ = device;
}

int HostRuntime::device_of(const void* p) {
  note_work();  // a pointer query needs a context on the current device
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(a);
  if (it == ranges_.begin()) return -1;
  --it;
  return a < it->second.first ? it->second.second : -1;
}

StreamHandle HostRuntime::create_stream() {
  note_work();
  return reinterpret_cast<StreamHandle>(kStreamBase + std::uintptr_t(current_));
}

void HostRuntime::order_after(StreamHandle waiter, StreamHandle signal) {
  if (waiter == signal) return;
  note_work();
  // The CUDA runtime's order_after makes one event per thread and device, on its first use.
  thread_local std::vector<bool> has_event;
  const auto dev = std::size_t(std::max(current_, 0));
  if (dev >= has_event.size()) has_event.resize(dev + 1, false);
  if (!has_event[dev]) {
    has_event[dev] = true;
    work::event_created();
  }
  if (!waiter || !signal) legacy_orders_.fetch_add(1);
  // CUDA records an event on `signal` with an event of the current device: a stream of another
  // device there is an error (cudaErrorInvalidResourceHandle), which this makes visible.
  const int d = device_of_stream(signal);
  if (d >= 0 && d != current_)
    throw std::logic_error("cuda-host runtime: an event recorded on device " + std::to_string(d) +
                           "'s stream while device " + std::to_string(current_) + " is current");
}

void* HostRuntime::create_pool(std::uint64_t) {
  note_work();
  return reinterpret_cast<void*>(std::uintptr_t(0x9000 + current_));
}

void HostRuntime::remember(const void* p, std::size_t bytes, int device) {
  if (!p || bytes == 0) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mu_);
  ranges_[a] = {a + bytes, device};
}

void HostRuntime::forget(const void* p) {
  if (!p) return;
  std::lock_guard lock(mu_);
  ranges_.erase(reinterpret_cast<std::uintptr_t>(p));
}

std::map<int, std::uint64_t> HostRuntime::work() const {
  std::map<int, std::uint64_t> out;
  for (int d = 0; d < kHostDevices; ++d)
    if (const auto w = work_[std::size_t(d)].load()) out[d] = w;
  return out;
}

void HostRuntime::reset_work() {
  for (auto& w : work_) w.store(0);
  for (auto& d : syncs_)
    for (auto& k : d) k.store(0);
  legacy_orders_.store(0);
}

void HostRuntime::note_sync(SyncKind kind) {
  syncs_[std::size_t(current_)][std::size_t(kind)].fetch_add(1);
  add_host_sync(kind);
  // A stream synchronized (alone or after a copy to the host) has done all its work; an event
  // waited for, the work before it (wait_event).
  if (kind != SyncKind::event) completed_.store(recorded_.load());
}

std::map<int, SyncCounts> HostRuntime::syncs() const {
  std::map<int, SyncCounts> out;
  for (int d = 0; d < kHostDevices; ++d) {
    const auto& k = syncs_[std::size_t(d)];
    const SyncCounts c{k[0].load(), k[1].load(), k[2].load()};
    if (c.total() > 0) out[d] = c;
  }
  return out;
}

std::uint64_t HostRuntime::record_event() {
  note_work();
  const std::uint64_t e = recorded_.fetch_add(1) + 1;
  if (!lag_) completed_.store(e);
  return e;
}

bool HostRuntime::event_done(std::uint64_t event) const { return event <= completed_.load(); }

void HostRuntime::wait_event(std::uint64_t event) {
  if (event > completed_.load()) completed_.store(event);
  note_sync(SyncKind::event);
}

HostRuntime& runtime() {
  static HostRuntime* rt = new HostRuntime;  // never destroyed: buffers may outlive statics
  return *rt;
}

DevicePolicy& device_policy() {
  static DevicePolicy* p = new DevicePolicy(runtime());
  return *p;
}

std::map<int, std::uint64_t> work_by_device() { return runtime().work(); }
std::uint64_t legacy_stream_orders() { return runtime().legacy_orders(); }
StreamHandle caller_stream(int device) {
  if (device < 0 || device >= kHostDevices)
    throw gs::Error("cuda-host: device " + std::to_string(device) + " does not exist");
  return reinterpret_cast<StreamHandle>(kCallerBase + std::uintptr_t(device));
}
void reset_work_by_device() { runtime().reset_work(); }
std::map<int, SyncCounts> syncs_by_device() { return runtime().syncs(); }
void set_device_lag(bool on) { runtime().set_lag(on); }

StagingPool& staging() {
  thread_local StagingPool pool;
  return pool;
}
std::uint64_t staging_allocations() { return staging().allocations(); }

DeviceMemory::DeviceMemory(const void* data, std::size_t bytes, int device) : data_(data) {
  if (device < 0 || device >= kHostDevices)
    throw gs::Error("cuda-host: device " + std::to_string(device) + " does not exist (" + std::to_string(kHostDevices) +
                    " fake devices)");
  runtime().remember(data, bytes, device);
}
DeviceMemory::~DeviceMemory() { runtime().forget(data_); }

}  // namespace gs::kernels::cuda_host
