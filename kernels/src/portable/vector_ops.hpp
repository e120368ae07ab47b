#pragma once
// gs::kernels::VectorOps over a backend's primitives (portable/passes.hpp's P), written once: the
// CUDA backend runs it with the CUB primitives, cuda-host with the host ones.
#include <algorithm>
#include <memory>
#include <string>

#include "gs/base/error.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/vector_ops.hpp"
#include "exchange_bodies.hpp"
#include "passes.hpp"

namespace gs::kernels::portable {

template <class B>  // a backend, as Passes<B>
class PortableVectorOps final : public VectorOps {
  using P = typename B::Prims;

 public:
  // runtime: the runtime of B's device policy (bind_thread sets its device).
  PortableVectorOps(B backend, BackendKind kind, int device, DeviceRuntime& runtime)
      : b_(std::move(backend)), kind_(kind), device_(device), rt_(runtime) {}
  BackendKind kind() const override { return kind_; }
  int device() const override { return device_; }
  void bind_thread() override { rt_.set_device(device_); }

  DeviceArray<float> floats(std::size_t n) override { return make<float>(n); }
  DeviceArray<std::int32_t> ints(std::size_t n) override { return make<std::int32_t>(n); }

  void add(const float* a, const float* b, float* out, std::uint64_t n) override {
    run(out, [&](P& p) { p.for_each(n, AddBody{a, b, out}); });
  }
  void copy(float* dst, const float* src, std::uint64_t n) override {
    run(dst, [&](P& p) { p.copy(dst, src, n); });
  }
  void copy(std::int32_t* dst, const std::int32_t* src, std::uint64_t n) override {
    run(dst, [&](P& p) { p.copy(dst, src, n); });
  }
  void fill(float* v, float value, std::uint64_t n) override {
    run(v, [&](P& p) { p.for_each(n, FillBody<float>{v, value}); });
  }
  void fill(std::int32_t* v, std::int32_t value, std::uint64_t n) override {
    run(v, [&](P& p) { p.for_each(n, FillBody<std::int32_t>{v, value}); });
  }
  void scale(float* v, float factor, std::uint64_t n) override {
    run(v, [&](P& p) { p.for_each(n, ScaleBody{v, factor}); });
  }
  void zero_at(float* v, const std::int32_t* idx, std::uint64_t k) override {
    run(v, [&](P& p) { p.for_each(k, ZeroAtBody{v, idx}); });
  }
  void scatter_add(float* out, const std::int32_t* idx, const float* val, std::uint64_t k) override {
    run(out, [&](P& p) { p.for_each(k, ScatterAddBody{out, idx, val}); });
  }
  std::uint64_t nonfinite(const float* v, std::uint64_t n) override {
    return run(v, [&](P& p) { return n - portable::count_above(p, v, n, -1.0); });
  }
  double squared_norm(const float* v, std::uint64_t n) override {
    return run(v, [&](P& p) { return n == 0 ? 0.0 : p.template sum<double>(n, SquareAsDouble{v}); });
  }
  void upload(void* d_dst, const void* host, std::size_t bytes) override {
    run(d_dst,
        [&](P& p) { p.upload(static_cast<unsigned char*>(d_dst), static_cast<const unsigned char*>(host), bytes); });
  }
  void download(void* host, const void* d_src, std::size_t bytes) override {
    run(d_src, [&](P& p) {
      const auto v = p.download(static_cast<const unsigned char*>(d_src), bytes);
      std::copy(v.begin(), v.end(), static_cast<unsigned char*>(host));
    });
  }

  void pack_pairs(const std::int32_t* idx, const float* val, const SelectionReport* report, std::uint64_t capacity,
                  std::int32_t* send_idx, float* send_val) override {
    run(send_idx, [&](P& p) {
      p.for_each(std::max<std::uint64_t>(capacity, 1), PackPairs{idx, val, report, capacity, send_idx, send_val});
    });
  }
  void add_and_clear(float* a, const float* b, float* out, std::uint64_t n, std::int32_t* flag) override {
    run(out, [&](P& p) {
      if (n == 0) {
        if (flag) p.for_each(1, FillBody<std::int32_t>{flag, 0});
        return;
      }
      p.for_each(n, AddAndClear{a, b, out, flag});
    });
  }
  void add_gathered_onto_zeros(float* out, std::uint64_t n, const std::int32_t* idx_all, const float* val_all,
                               std::uint64_t capacity, int workers, std::int32_t* bucket_skip,
                               std::int32_t* step_skip) override {
    run(out, [&](P& p) {
      // As Compressor::aggregate: ranks in order onto the zeros, then the mean; every thread of the
      // first rank's launch decides the skip from the gathered counts, its first one writes it.
      const GatheredSkip skip{idx_all, capacity + 1, workers, bucket_skip, step_skip};
      for (int r = 0; r < workers; ++r) {
        const std::uint64_t at = std::uint64_t(r) * (capacity + 1);
        if (r == 0)
          p.for_each(std::max<std::uint64_t>(capacity, 1), AddFirstSent{out, idx_all, val_all, capacity, skip});
        else
          p.for_each(capacity, AddSent{out, idx_all + at, val_all + at, bucket_skip});
      }
      if (workers == 0) p.for_each(1, skip);
      if (n > 0) p.for_each(n, ScaleBody{out, 1.0f / float(workers)});
    });
  }
  void zero_sent_and_report(float* acc, const std::int32_t* send_idx, std::uint64_t capacity,
                            const std::int32_t* bucket_skip, const SelectionReport* report,
                            ExchangeReport* host) override {
    run(acc, [&](P& p) {
      p.for_each(std::max<std::uint64_t>(capacity, 1),
                 ZeroSentAndReport{ZeroSent{acc, send_idx, bucket_skip},
                                   ReportExchange{report, send_idx, capacity, bucket_skip, host}, capacity});
    });
  }
  void restore_if(float* v, const float* old, std::uint64_t n, const std::int32_t* skip) override {
    run(v, [&](P& p) { p.for_each(n, RestoreIf{v, old, skip}); });
  }
  std::shared_ptr<void> host_memory(std::size_t bytes) override {
    return run(nullptr, [&](P& p) { return p.host_memory(bytes); });
  }
  std::unique_ptr<DeviceMark> mark() override {
    return run(nullptr, [&](P& p) { return p.mark(); });
  }

 private:
  // One call on the device of `data` (null: the thread's, bound by bind_thread or a CallerStream),
  // which must be device(): work for this vector never lands on another device.
  template <class F>
  auto run(const void* data, F f) {
    auto call = b_.call(data);
    if (call.device() != device_)
      throw gs::Error("vector operations of device " + std::to_string(device_) + " called with device " +
                      std::to_string(call.device()) + (data ? "'s memory" : " current") +
                      ": the bucket's work must run on the bucket's device");
    return f(call.prims());
  }
  template <class T>
  DeviceArray<T> make(std::size_t n) {
    return run(nullptr, [&](P& p) {
      auto owner = std::make_shared<Buffer<P, T>>(p.template alloc<T>(n));
      T* data = owner->data();
      return DeviceArray<T>(std::shared_ptr<void>(owner, data), data, n);
    });
  }

  B b_;
  BackendKind kind_;
  int device_;
  DeviceRuntime& rt_;
};

}  // namespace gs::kernels::portable
