#pragma once
// The primitives of portable/passes.hpp on the host: the `cuda-host` backend. Each runs the same
// per-element bodies as the CUB primitives, sequentially; the hand-written reductions run their
// per-thread bodies for every thread of the grid the GPU would launch (a 2-SM device's), so the
// grid-stride indexing, the 4-wide loads and the tails are exercised as on the device. Buffers
// belong to the fake device current on the allocating thread (runtime.hpp), every operation counts
// as work on the current device, and copies between "device" buffers and the host's own memory
// count towards bus_bytes() as the CUDA backend's copies do. Each call counts in device_work() what
// the CUDA backend's same call queues (cub_prims.cuh): its launches, allocations, events and CUB
// dispatches, so that a step's device cost is counted here.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../portable/bodies.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/vector_ops.hpp"
#include "runtime.hpp"
#include "staging.hpp"

namespace gs::kernels::cuda_host {

// fail_allocation_after's count: allocations left before the injected failure (-1: none).
inline std::atomic<std::int64_t> allocations_before_failure{-1};
// Bytes the backend allocated (allocated_bytes()).
inline std::atomic<std::uint64_t> bytes_allocated{0};
// CUB's temporary storage as the CUDA backend would allocate it: per call without a workspace,
// when the workspace grows with one (scratch_allocations()).
inline std::atomic<std::uint64_t> scratch_allocated{0};

// CudaMark's spare events on this thread (their count: kSpareMarks at most, as cub_prims.cuh).
inline constexpr std::size_t kSpareMarks = 16;
inline thread_local std::size_t spare_marks = 0;

// An event of the fake devices (HostRuntime::record_event), counted as CudaMark makes its own:
// only where this thread has no spare one.
class HostMark final : public DeviceMark {
 public:
  explicit HostMark(std::uint64_t event) : event_(event) {
    if (spare_marks > 0)
      --spare_marks;
    else
      work::event_created();
  }
  ~HostMark() override {
    if (spare_marks < kSpareMarks) ++spare_marks;
  }
  bool done() override { return runtime().event_done(event_); }
  void wait() override { runtime().wait_event(event_); }

 private:
  std::uint64_t event_;
};

class HostPrims {
 public:
  static constexpr std::uint64_t kThreads = 256;  // per block, as the CUDA backend

  // The SMs of the device whose grid the hand-written kernels' twins run: a small GPU's (2), unless
  // set_multiprocessors() said otherwise.
  HostPrims() : sms_(multiprocessors()) {}
  explicit HostPrims(int multiprocessors) : sms_(multiprocessors) {}

  // Memory of the device current when it was made (runtime().remember), uninitialized.
  template <class T>
  class Buffer {
   public:
    Buffer() = default;
    explicit Buffer(std::size_t count) : p_(count ? new T[count] : nullptr), size_(count) {
      runtime().remember(p_, count * sizeof(T), runtime().current_device());
      if (count) work::allocation();  // DeviceBuffer's, from gradscope's pool
    }
    ~Buffer() { reset(); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept : p_(o.p_), size_(o.size_) {
      o.p_ = nullptr;
      o.size_ = 0;
    }
    Buffer& operator=(Buffer&& o) noexcept {
      if (this != &o) {
        reset();
        p_ = o.p_;
        size_ = o.size_;
        o.p_ = nullptr;
        o.size_ = 0;
      }
      return *this;
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return size_; }

   private:
    void reset() noexcept {
      if (p_) runtime().forget(p_);
      delete[] p_;
      p_ = nullptr;
      size_ = 0;
    }
    T* p_ = nullptr;
    std::size_t size_ = 0;
  };

  // Fails as a device out of memory would when a test asked for it (fail_allocation_after).
  template <class T>
  Buffer<T> alloc(std::size_t count) const {
    if (allocations_before_failure.load() >= 0 && allocations_before_failure.fetch_sub(1) == 0)
      throw device_error(
          "cudaErrorMemoryAllocation", "out of memory",
          "the cuda-host backend's allocation of " + std::to_string(count * sizeof(T)) + " bytes (injected)");
    runtime().note_work();
    bytes_allocated += count * sizeof(T);
    return Buffer<T>(count);
  }
  template <class T>
  void zero(T* p, std::size_t count) const {
    runtime().note_work();
    if (count) work::memset();
    std::fill(p, p + count, T{});
  }
  // A value read back: a copy to the host that returns once done (one blocking synchronization).
  template <class T>
  T read(const T* p) const {
    copied_back(sizeof(T));
    return *p;
  }
  template <class T>
  std::vector<T> download(const T* p, std::size_t count) const {
    copied_back(count * sizeof(T));
    return std::vector<T>(p, p + count);
  }
  // Through a pinned staging block, queued: returns at once (the block is reused once the
  // copy's event is done), as the CUDA backend's uploads.
  template <class T>
  void upload(T* dst, const T* host, std::size_t count) const {
    if (count == 0) return;
    copied(count * sizeof(T));
    StagingLease block(staging(), count * sizeof(T));
    std::memcpy(block.data(), host, count * sizeof(T));
    std::memcpy(dst, block.data(), count * sizeof(T));  // the device's copy, run when queued
    block.done_after(nullptr);
  }
  // A device-to-device copy.
  template <class T>
  void copy(T* dst, const T* src, std::size_t count) const {
    runtime().note_work();
    if (count) {
      work::copy();
      std::memmove(dst, src, count * sizeof(T));
    }
  }
  // The host waits for the stream (a blocking synchronization).
  void synchronize() const { runtime().note_sync(SyncKind::stream); }
  // Pinned host memory of this thread's staging pool that the device may write into.
  StagingLease pinned(std::size_t bytes) const { return StagingLease(staging(), bytes); }
  // CUB's temporary storage comes from *scratch (grown as needed) rather than from each call.
  void use_scratch(Buffer<unsigned char>* scratch) { scratch_ = scratch; }
  // Host memory the device may write into (zeroed), and a mark after the work queued so far.
  std::shared_ptr<void> host_memory(std::size_t bytes) const {
    work::allocation();  // pinned, mapped
    return std::shared_ptr<void>(new unsigned char[bytes](), [](void* q) { delete[] static_cast<unsigned char*>(q); });
  }
  std::unique_ptr<DeviceMark> mark() const { return std::make_unique<HostMark>(runtime().record_event()); }

  std::uint64_t grid_for(std::uint64_t n) const { return grid_blocks(sms_, kThreads, n); }

  // reduce_kernel's twin: every thread of every block, the block's threads merged in order, the
  // block partials merged in block order. Counted as the CUDA backend queues it: the partials in
  // the scratch workspace where one is set (allocated when it grows), and the merge by one block.
  template <class Acc, class Elem, class Merge>
  void reduce_into(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge, Acc* out) const {
    partials_for<Acc>(n);
    work::launch(grid_for(n), kThreads, n);  // reduce_kernel
    work::launch(1, kThreads);               // merge_partials_kernel
    *out = reduce_blocks<Acc>(g, n, elem, merge);
  }
  // reduce_then_kernel's twin: reduce_into's arithmetic in one launch (its last block merges and
  // decides), then then(0); *done must be 0, and stays so, as the kernel leaves it.
  template <class Acc, class Elem, class Merge, class Then>
  void reduce_then(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge, Acc* out, std::uint32_t* done,
                   const Then& then) const {
    if (*done != 0) throw std::logic_error("reduce_then: its count of blocks done is not 0");
    partials_for<Acc>(n);
    work::launch(grid_for(n), kThreads, n);  // reduce_then_kernel
    *out = reduce_blocks<Acc>(g, n, elem, merge);
    then(std::uint64_t{0});
  }
  template <class Acc, class Elem, class Merge>
  Acc reduce(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge) const {
    Buffer<Acc> out(1);
    reduce_into(g, n, elem, merge, out.data());
    return read(out.data());  // the merged result, as the CUDA backend reads it back
  }

  template <class F>
  void for_each(std::uint64_t m, const F& f) const {
    if (m) {
      runtime().note_work();
      work::launch(grid_for(m), kThreads, m);
    }
    for (std::uint64_t j = 0; j < m; ++j) f(j);
  }
  // f(j) for j < min(*d_m, capacity): a count the device holds bounds the work (no read-back).
  template <class Count, class F>
  void for_each_upto(const Count* d_m, std::uint64_t capacity, const F& f) const {
    if (capacity == 0) return;
    runtime().note_work();
    work::launch(grid_for(capacity), kThreads);  // its count lies on the device: no elements counted
    const std::uint64_t m = std::min<std::uint64_t>(*d_m, capacity);
    for (std::uint64_t j = 0; j < m; ++j) f(j);
  }

  template <class T, class F>
  T sum(std::uint64_t m, const F& f) const {
    runtime().note_work();
    work::allocation();  // its result's buffer
    work::cub(work::Cub::reduce, m);
    scratch_for({work::Cub::reduce, m, 0, int(sizeof(T))}, 512);
    copied_back(sizeof(T));
    T s{};
    for (std::uint64_t j = 0; j < m; ++j) s += f(j);
    return s;
  }

  // Through the same bounded store as the CUB primitives: nothing past capacity; DeviceSelect's
  // count comes back to the host.
  template <class Index, class Pred>
  std::uint64_t select_if(std::uint64_t n, const Pred& pred, Index* out, std::uint64_t capacity) const {
    if (n == 0) return 0;
    const portable::BoundedStore<Index> store{out, capacity};
    runtime().note_work();
    work::allocation();  // the count's buffer
    work::cub(work::Cub::select, n);
    scratch_for({work::Cub::select, n, 0, int(sizeof(Index))}, 512 + n / 128);
    std::uint64_t m = 0;
    for (std::uint64_t i = 0; i < n; ++i)
      if (pred(Index(i))) store(std::int64_t(m++), Index(i));
    copied_back(sizeof(unsigned long long));
    return m;
  }
  // select_then_kernel's twin: one launch. Open, each block of the grid takes a chunk of the len
  // elements in order; its hits' positions are kept (kSelectStaged at most, else the block reads
  // its chunk again: counted); the count, positions and values are the kernel's; the weight is
  // summed in index order (the kernel's trees may round its last bits otherwise). Closed, nothing
  // read or written. then(count) after either.
  template <class Sel, class Index, class Then>
  void select_then(std::uint64_t n, const Sel& sel, Index* out, float* values, std::uint64_t capacity,
                   std::uint64_t* count, double* weight, const portable::SelectRoom& room, const Then& then) const {
    runtime().note_work();
    const std::uint64_t grid = grid_for(std::max<std::uint64_t>(n, 1));
    if (room.blocks < grid || room.epoch == 0 || room.ticket[0] != 0 || room.ticket[1] != 0)
      throw std::logic_error("select_then: its room is not reserved for this grid, or a call left it dirty");
    const auto b = sel.bind();
    if (!b.on) {
      work::launch(grid, kThreads);  // every block reads the gate and counts itself done
      then(std::uint64_t{0});
      return;
    }
    const std::uint64_t len = std::min(n, b.len), chunk = (len + grid - 1) / grid;
    const std::uint64_t r = b.tie_limit();
    std::uint64_t taken = 0, ties = 0, read = len, m = 0;
    double total = 0.0;
    for (std::uint64_t blk = 0; blk < grid; ++blk) {
      const std::uint64_t begin = std::min(len, blk * chunk), end = std::min(len, begin + chunk);
      std::uint64_t hits = 0;
      double w = 0.0;
      for (std::uint64_t i = begin; i < end; ++i) {
        const unsigned f = b.flags(i);
        w += b.weight(i);
        if (!f) continue;
        ++hits;
        const bool take = (f & portable::kTake) || ties < r;
        const std::uint64_t pos = taken + std::min(ties, r);
        if (take && pos < capacity) {
          out[pos] = Index(b.index(i));
          if (values) values[pos] = b.value(i);
        }
        if (f & portable::kTake)
          ++taken;
        else
          ++ties;
      }
      if (hits > portable::kSelectStaged) read += end - begin;
      room.published[blk] = room.epoch;  // as the device leaves it
      total += w;
    }
    m = taken + std::min(ties, r);
    work::launch(grid, kThreads, read);
    *count = m;
    if (weight) *weight = total;
    then(m);
  }

  // gated_histogram_kernel's twin: one launch; where the gate is open, the counts, their copy
  // zeroed for the next pass and then(copy); else nothing read. Counted: the digit's extent.
  template <class Digit, class Then>
  void gated_histogram_then(std::uint64_t n, const Digit& digit, int bins, unsigned long long* counts,
                            const std::int32_t* gate, std::int32_t open, std::uint32_t* done, const Then& then) const {
    if (bins < 1 || bins > int(portable::kBins))
      throw gs::Error("gated_histogram_then: bins out of range (please report)");
    runtime().note_work();
    if (*gate != open) {
      work::launch(grid_for(n), kThreads);  // every block reads the gate and returns
      return;
    }
    if (*done != 0) throw std::logic_error("gated_histogram_then: its count of blocks done is not 0");
    work::launch(grid_for(n), kThreads, portable::digit_extent(digit, n));
    for (std::uint64_t i = 0, len = portable::digit_extent(digit, n); i < len; ++i) {
      const int d = digit(i);
      if (d >= 0 && d < bins) ++counts[d];
    }
    std::vector<unsigned long long> total(counts, counts + bins);
    std::fill(counts, counts + bins, 0ull);
    then(static_cast<const unsigned long long*>(total.data()));
  }

  // log_histogram_kernel's twin (its shared-memory counters change nothing but speed).
  void log_histogram(const float* g, std::uint64_t n, const portable::LogSlots& slot,
                     unsigned long long* counts) const {
    runtime().note_work();
    work::launch(grid_for(n), kThreads, n);  // log_histogram_kernel
    for (std::uint64_t i = 0; i < n; ++i) ++counts[slot(g[i])];
  }

  // cub::DeviceRadixSort's order: keys compared on bits [begin, end) of their radix form (signed
  // integers and floats mapped so that unsigned order is their order), stable.
  template <class K>
  void sort_keys(const K* in, K* out, std::uint64_t m, int begin_bit, int end_bit, bool descending) const {
    runtime().note_work();
    work::cub(work::Cub::radix_sort, m, end_bit - begin_bit);
    scratch_for({work::Cub::radix_sort, m, end_bit - begin_bit, int(sizeof(K))}, 512 + m * sizeof(K));
    std::copy(in, in + m, out);
    std::stable_sort(out, out + m, order<K>(begin_bit, end_bit, descending));
  }
  template <class K, class V>
  void sort_pairs(const K* kin, K* kout, const V* vin, V* vout, std::uint64_t m, int begin_bit, int end_bit,
                  bool descending) const {
    runtime().note_work();
    work::cub(work::Cub::radix_sort, m, end_bit - begin_bit);
    scratch_for({work::Cub::radix_sort, m, end_bit - begin_bit, int(sizeof(K)), int(sizeof(V))},
                512 + m * (sizeof(K) + sizeof(V)));
    std::vector<std::uint64_t> perm(m);
    std::iota(perm.begin(), perm.end(), std::uint64_t{0});
    const auto less = order<K>(begin_bit, end_bit, descending);
    std::stable_sort(perm.begin(), perm.end(), [&](std::uint64_t a, std::uint64_t b) { return less(kin[a], kin[b]); });
    for (std::uint64_t j = 0; j < m; ++j) {
      kout[j] = kin[perm[j]];
      vout[j] = vin[perm[j]];
    }
  }

 private:
  // A copy between the host and a device buffer (bus_bytes), as work of the current device.
  static void copied(std::uint64_t bytes) {
    runtime().note_work();
    add_bus_bytes(bytes);
  }
  // The same to the host, which waits for it.
  static void copied_back(std::uint64_t bytes) {
    copied(bytes);
    runtime().note_sync(SyncKind::copy);
  }
  // The block partials' room, counted as the CUDA backend makes it: in the scratch workspace where
  // one is set (allocated when it grows), else a buffer of their own.
  template <class Acc>
  void partials_for(std::uint64_t n) const {
    const std::uint64_t bytes = sizeof(Acc) * grid_for(n);
    runtime().note_work();
    if (!scratch_)
      work::allocation();
    else if (scratch_->size() < bytes)
      *scratch_ = alloc<unsigned char>(std::max<std::uint64_t>(bytes, 2 * scratch_->size()));
  }
  // Every thread of every block the GPU would run, the block's threads merged in order, the block
  // partials merged in block order.
  template <class Acc, class Elem, class Merge>
  Acc reduce_blocks(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge) const {
    const std::uint64_t grid = grid_for(n), stride = grid * kThreads;
    const bool aligned = (reinterpret_cast<std::uintptr_t>(g) & 15u) == 0;
    Acc total{};
    for (std::uint64_t b = 0; b < grid; ++b) {
      Acc block{};
      for (std::uint64_t t = 0; t < kThreads; ++t)
        block = merge(block, portable::reduce_thread<Acc>(g, n, b * kThreads + t, stride, aligned, elem));
      total = merge(total, block);
    }
    return total;
  }
  // CUB's temporary storage for `key`, of `model` bytes (CUB sizes it by the input), its size asked
  // as the CUDA backend asks it (once per key and thread), from the scratch workspace when one is
  // set (allocated only when it grows), else allocated for the call.
  void scratch_for(const work::ScratchKey& key, std::uint64_t model) const {
    const std::uint64_t bytes = work::scratch_size(key, [model] { return model; });
    if (scratch_ && scratch_->size() >= bytes) return;
    ++scratch_allocated;
    if (scratch_)
      *scratch_ = alloc<unsigned char>(std::max<std::uint64_t>(bytes, 2 * scratch_->size()));
    else
      work::allocation();  // the call's own temporary storage
  }
  template <class K>
  static auto radix_form(K key) {
    using U = std::conditional_t<sizeof(K) == 8, std::uint64_t, std::uint32_t>;
    static_assert(sizeof(K) == sizeof(U));
    U u;
    std::memcpy(&u, &key, sizeof u);
    const U top = U(1) << (8 * sizeof(U) - 1);
    if constexpr (std::is_floating_point_v<K>)
      u = (u & top) ? U(~u) : U(u | top);
    else if constexpr (std::is_signed_v<K>)
      u ^= top;
    return u;
  }
  template <class K>
  static auto order(int begin_bit, int end_bit, bool descending) {
    using U = decltype(radix_form(K{}));
    const int width = end_bit - begin_bit;
    const U mask = width >= int(8 * sizeof(U)) ? ~U(0) : U((U(1) << width) - 1);
    return [=](const K& a, const K& b) {
      const U x = U(radix_form(a) >> begin_bit) & mask, y = U(radix_form(b) >> begin_bit) & mask;
      return descending ? x > y : x < y;
    };
  }

  int sms_ = 2;
  Buffer<unsigned char>* scratch_ = nullptr;
};

// The host as a backend of portable::Passes and PortableSelector: each call runs on the fake
// device of its data under the device policy's scope (cuda_host::device_policy()), as a CubCall
// runs on a GPU: that device current, ordered after the caller's stream.
struct HostBackend {
  using Prims = HostPrims;
  class Call {
   public:
    Call(const void* data, StreamHandle caller) : scope_(device_policy(), data, caller) {}
    HostPrims& prims() { return p_; }
    int device() const { return scope_.device(); }

   private:
    DeviceScope scope_;
    HostPrims p_;
  };
  Call call(const void* data) const { return Call(data, caller); }
  StreamHandle caller = nullptr;
};

}  // namespace gs::kernels::cuda_host
