#pragma once
// VectorOps: vectors in a backend's memory on one device, and the element-wise work the DDP
// hook's device path does on them (error feedback's accumulate and masking, the scatter-add of
// every worker's selection into the bucket, copies in and out). Each call runs on the device under
// the device policy (gs/kernels/device.hpp): ordered after the caller's stream (a CallerStream
// set around the call), on gradscope's stream, from gradscope's pool. The CUDA backend runs it on
// the GPU; cuda-host runs the same code on the host over its fake devices.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gs/kernels/backend.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels {

// A point in a device's stream (an event): whether the work queued before it is done.
class DeviceMark {
 public:
  virtual ~DeviceMark() = default;
  virtual bool done() = 0;  // without waiting
  virtual void wait() = 0;  // blocks until it is (a blocking synchronization, counted)
};

// What one bucket's exchange with device collectives leaves for the step's statistics, written
// by the device into host memory (zero_sent_and_report): nothing waits for it; the host reads it once
// a mark after it is done.
struct ExchangeReport {
  SelectionReport selection;   // the worker's selection, as made
  std::uint64_t sent = 0;      // pairs sent: the selection, capped at the send buffer's capacity
  std::uint64_t overflow = 0;  // pairs the capacity left out (they stay in the residual)
  std::int32_t skipped = 0;    // a worker met NaN or Inf: the bucket's update is zeros
  std::int32_t pad = 0;
};

// An owning array of T in a backend's memory (freed, stream-ordered, with its last reference).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(std::shared_ptr<void> owner, T* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::shared_ptr<void> owner_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

class VectorOps {
 public:
  virtual ~VectorOps() = default;
  virtual BackendKind kind() const = 0;
  virtual int device() const = 0;
  // Makes device() the calling thread's current device, for good (not for one call): the thread
  // that works for a bucket works on the bucket's device, and its first runtime call must not
  // start a context on another (device 0, every thread's default).
  virtual void bind_thread() = 0;

  // n elements, uninitialized. gs::Error when the call would run on another device than device().
  virtual DeviceArray<float> floats(std::size_t n) = 0;
  virtual DeviceArray<std::int32_t> ints(std::size_t n) = 0;

  virtual void add(const float* a, const float* b, float* out, std::uint64_t n) = 0;  // out = a + b
  // out = a + b, then a = 0, in one pass; *flag = 0 too where flag is given (a step's flag cleared
  // by its first bucket's pass).
  virtual void add_and_clear(float* a, const float* b, float* out, std::uint64_t n, std::int32_t* flag) = 0;
  virtual void copy(float* dst, const float* src, std::uint64_t n) = 0;
  virtual void copy(std::int32_t* dst, const std::int32_t* src, std::uint64_t n) = 0;
  virtual void fill(float* v, float value, std::uint64_t n) = 0;
  virtual void fill(std::int32_t* v, std::int32_t value, std::uint64_t n) = 0;
  virtual void scale(float* v, float factor, std::uint64_t n) = 0;  // v *= factor, in float
  // v[idx[j]] = 0 for j < k.
  virtual void zero_at(float* v, const std::int32_t* idx, std::uint64_t k) = 0;
  // out[idx[j]] += val[j] for j < k; idx distinct (one worker's selection), so no two adds meet.
  virtual void scatter_add(float* out, const std::int32_t* idx, const float* val, std::uint64_t k) = 0;
  // Count of NaN/Inf in v (one read; the count comes back).
  virtual std::uint64_t nonfinite(const float* v, std::uint64_t n) = 0;
  // Sum of v[i]^2 in double (one read; the sum comes back).
  virtual double squared_norm(const float* v, std::uint64_t n) = 0;
  // Between the host and this device (bus_bytes counts them). An upload is queued (it returns at
  // once); a download returns once done (a blocking synchronization).
  virtual void upload(void* d_dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* d_src, std::size_t bytes) = 0;

  // ---- the exchange with device collectives, decided on the device (nothing read back) ----------
  // A send buffer of capacity + 1 slots from a selection (idx, val) and its report (device memory):
  // slot 0 the count sent, min(count, capacity) (-1 when the report counted NaN or Inf: the
  // bucket is skipped everywhere), slots 1.. those pairs and zeros after them. The capacity is the
  // same on every worker, so the cap keeps the lowest indices everywhere alike.
  virtual void pack_pairs(const std::int32_t* idx, const float* val, const SelectionReport* report,
                          std::uint64_t capacity, std::int32_t* send_idx, float* send_val) = 0;
  // out (n, holding zeros already: add_and_clear's) += every worker's pairs in rank order, then
  // 1/workers, from the gathered send buffers (workers x (capacity + 1) slots): one launch a worker
  // and the mean. Zeros when a worker sent -1, which sets *bucket_skip (else 0) and *step_skip,
  // decided by the first worker's launch.
  virtual void add_gathered_onto_zeros(float* out, std::uint64_t n, const std::int32_t* idx_all, const float* val_all,
                                       std::uint64_t capacity, int workers, std::int32_t* bucket_skip,
                                       std::int32_t* step_skip) = 0;
  // acc[i] = 0 for the indices a send buffer sent, unless *bucket_skip, and *host = the bucket's
  // report (written by the device into host memory from host_memory()), in one launch.
  virtual void zero_sent_and_report(float* acc, const std::int32_t* send_idx, std::uint64_t capacity,
                                    const std::int32_t* bucket_skip, const SelectionReport* report,
                                    ExchangeReport* host) = 0;
  // v = old where *skip (the step's residuals kept as they were), else left.
  virtual void restore_if(float* v, const float* old, std::uint64_t n, const std::int32_t* skip) = 0;
  // Host memory the device may write into (pinned and mapped on a GPU), zeroed.
  virtual std::shared_ptr<void> host_memory(std::size_t bytes) = 0;
  // A mark after the work queued so far on this device.
  virtual std::unique_ptr<DeviceMark> mark() = 0;
};

// The VectorOps of `kind` (cuda or cuda_host) on `device`. gs::Error for the CPU backend (its
// vectors are host memory: nothing to do on a device) and for cuda without a usable GPU.
std::unique_ptr<VectorOps> make_vector_ops(BackendKind kind, int device);

}  // namespace gs::kernels
