#pragma once
// The cuda-host backend's devices: a DeviceRuntime of fake devices over host memory, so that the
// device policy (gs/kernels/device.hpp) runs for the cuda-host backend as it does for CUDA. As on
// a GPU, each thread has its own current device (0 until it sets one); memory the backend
// allocates belongs to the device current on the allocating thread; memory a caller declares with
// cuda_host::DeviceMemory belongs to the device it names; a call runs on the device of its data.
// Every piece of work (a launch's stand-in, an allocation, a copy, a stream, a pool, a pointer
// query, which on a GPU needs a context on the current device) is counted against the device
// current on the thread that does it: tests read the counts to see where work landed.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"

namespace gs::kernels::cuda_host {

class HostRuntime final : public DeviceRuntime {
 public:
  int device_count() override { return kHostDevices; }
  std::string status() override { return std::to_string(kHostDevices) + " cuda-host device(s) over host memory"; }
  DeviceProperties properties(int device) override;
  int current_device() override { return current_; }
  void set_device(int device) override;
  int device_of(const void* p) override;
  StreamHandle create_stream() override;
  void order_after(StreamHandle waiter, StreamHandle signal) override;
  void* create_pool(std::uint64_t release_threshold) override;

  // Work on the current device of this thread (counted).
  void note_work() { work_[std::size_t(current_)].fetch_add(1, std::memory_order_relaxed); }
  // [p, p + bytes) is memory of `device` until forget(p).
  void remember(const void* p, std::size_t bytes, int device);
  void forget(const void* p);
  std::map<int, std::uint64_t> work() const;
  void reset_work();
  std::uint64_t legacy_orders() const { return legacy_orders_.load(); }

  // A blocking synchronization of the current device (the host waits for it): counted per device
  // and kind, and in this thread's host_syncs(). A stream's (or a copy's) completes the work queued
  // so far (what the device had left to do, with lag on); an event's, the work before the event.
  void note_sync(SyncKind kind);
  std::map<int, SyncCounts> syncs() const;
  // Events: the work queued so far (a sequence number). Done at once, as the host runs a device's
  // work when it is queued, unless lag is on: then done only after a synchronization since.
  std::uint64_t record_event();
  bool event_done(std::uint64_t event) const;
  void wait_event(std::uint64_t event);
  void set_lag(bool on) { lag_ = on; }

 private:
  static thread_local int current_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::pair<std::uintptr_t, int>> ranges_;  // begin -> (end, device)
  std::array<std::atomic<std::uint64_t>, kHostDevices> work_{};
  std::atomic<std::uint64_t> legacy_orders_{0};  // orderings with the legacy default stream
  std::array<std::array<std::atomic<std::uint64_t>, 3>, kHostDevices> syncs_{};  // by device and SyncKind
  std::atomic<std::uint64_t> recorded_{0}, completed_{0};                        // events recorded; done up to
  std::atomic<bool> lag_{false};
};

HostRuntime& runtime();

}  // namespace gs::kernels::cuda_host
