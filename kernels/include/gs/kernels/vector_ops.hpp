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

namespace gs::kernels {

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
  // Between the host and this device (bus_bytes counts them).
  virtual void upload(void* d_dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* d_src, std::size_t bytes) = 0;
};

// The VectorOps of `kind` (cuda or cuda_host) on `device`. gs::Error for the CPU backend (its
// vectors are host memory: nothing to do on a device) and for cuda without a usable GPU.
std::unique_ptr<VectorOps> make_vector_ops(BackendKind kind, int device);

}  // namespace gs::kernels
