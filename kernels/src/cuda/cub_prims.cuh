#pragma once
// The primitives of portable/passes.hpp on the GPU: CUB's device algorithms over thrust's fancy
// iterators, one generic grid-stride map, and hand-written kernels (docs/architecture.md says why):
// the fused reduction (float4 loads, cub::BlockReduce, block partials merged by one block in a
// fixed order, so results repeat run to run), the same with its last block merging and deciding
// (reduce_then), the gated radix histogram and the log histogram (block-private counters in shared
// memory), and the one-launch selection (select_kernel.cuh). Their per-thread bodies are
// portable::reduce_thread, the digit functors and portable::LogSlots, which the host primitives
// run too.
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "../portable/bodies.hpp"
#include "cuda_common.cuh"
#include "select_kernel.cuh"

namespace gs::kernels::cuda::detail {

template <class Acc, class Elem, class Merge>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const float* __restrict__ g, std::uint64_t n, bool aligned, Elem elem, Merge merge, Acc* partials) {
  const std::uint64_t tid = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  const Acc acc = portable::reduce_thread<Acc>(g, n, tid, stride, aligned, elem);
  using BlockReduce = cub::BlockReduce<Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const Acc r = BlockReduce(temp).Reduce(acc, merge);
  if (threadIdx.x == 0) partials[blockIdx.x] = r;
}

// The block partials merged by one block: thread t merges partials t, t + kThreads, ... in order,
// then the threads' by a block reduction. The grid is fixed for a device and n (grid_blocks), so
// the order, and the result, repeat bit for bit from run to run; one accumulator is left to read
// back instead of one per block.
template <class Acc, class Merge>
__global__ void __launch_bounds__(kThreads)
    merge_partials_kernel(const Acc* partials, int count, Merge merge, Acc* out) {
  Acc r{};
  for (int b = threadIdx.x; b < count; b += kThreads) r = merge(r, partials[b]);
  using BlockReduce = cub::BlockReduce<Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const Acc total = BlockReduce(temp).Reduce(r, merge);
  if (threadIdx.x == 0) *out = total;
}

// An accumulator another block wrote, read past this SM's L1 (which may hold none of it, or stale
// lines): 32-bit words through the L2, as the last block of reduce_then_kernel reads the partials.
template <class Acc>
__device__ Acc load_from_l2(const Acc* p) {
  static_assert(sizeof(Acc) % sizeof(unsigned int) == 0, "accumulators are whole 32-bit words");
  Acc r;
  const auto* src = reinterpret_cast<const unsigned int*>(p);
  auto* dst = reinterpret_cast<unsigned int*>(&r);
  for (std::size_t w = 0; w < sizeof(Acc) / sizeof(unsigned int); ++w) dst[w] = __ldcg(src + w);
  return r;
}

// reduce_kernel, then, in the same launch, the merge and a decision: each block writes its partial
// and counts itself done (*done, device memory, 0 before); the last block to finish merges the
// partials as merge_partials_kernel does (the same order: the same result), writes *out, sets
// *done back to 0 and runs then(0) on one thread. One launch where three were.
template <class Acc, class Elem, class Merge, class Then>
__global__ void __launch_bounds__(kThreads)
    reduce_then_kernel(const float* __restrict__ g, std::uint64_t n, bool aligned, Elem elem, Merge merge,
                       Acc* partials, unsigned int* done, Acc* out, Then then) {
  const std::uint64_t tid = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  const Acc acc = portable::reduce_thread<Acc>(g, n, tid, stride, aligned, elem);
  using BlockReduce = cub::BlockReduce<Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ bool last;
  const Acc r = BlockReduce(temp).Reduce(acc, merge);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = r;
    __threadfence();  // the partial is visible to every block before the count says so
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Acc m{};
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) m = merge(m, load_from_l2(partials + b));
  const Acc total = BlockReduce(temp).Reduce(m, merge);  // temp is free again: every thread passed the barrier
  if (threadIdx.x == 0) {
    *out = total;
    *done = 0;
    then(std::uint64_t{0});
  }
}

// gated_histogram_then's kernel: nothing unless *gate == open (every block reads it first; it
// stays so until the last block's then); block-private 32-bit counters in shared memory, added to
// the 64-bit counts; the last block done copies the counts, zeroes them for the next pass, sets
// *done back to 0 and runs then(copy) on one thread.
template <class Digit, class Then>
__global__ void __launch_bounds__(kThreads)
    gated_histogram_kernel(std::uint64_t n, Digit digit, int bins, unsigned long long* counts, const std::int32_t* gate,
                           std::int32_t open, unsigned int* done, Then then) {
  if (*gate != open) return;
  __shared__ unsigned int local[portable::kBins];
  __shared__ unsigned long long total[portable::kBins];
  __shared__ bool last;
  for (int s = threadIdx.x; s < bins; s += kThreads) local[s] = 0;
  __syncthreads();
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x, len = portable::digit_extent(digit, n);
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < len; i += stride) {
    const int b = digit(i);
    if (b >= 0 && b < bins) atomicAdd(&local[b], 1u);
  }
  __syncthreads();
  for (int s = threadIdx.x; s < bins; s += kThreads)
    if (local[s]) atomicAdd(&counts[s], static_cast<unsigned long long>(local[s]));
  __threadfence();  // this thread's counts are visible before the block says it is done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int s = threadIdx.x; s < bins; s += kThreads) {
    total[s] = __ldcg(counts + s);
    counts[s] = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    *done = 0;
    then(static_cast<const unsigned long long*>(total));
  }
}

template <class F>
__global__ void for_each_kernel(std::uint64_t m, F f) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; j < m; j += stride) f(j);
}

// for_each_kernel over j < min(*m, capacity): a count the device holds bounds the work.
template <class Count, class F>
__global__ void for_each_upto_kernel(const Count* m, std::uint64_t capacity, F f) {
  const std::uint64_t count = std::uint64_t(*m) < capacity ? std::uint64_t(*m) : capacity;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; j < count; j += stride) f(j);
}

// Block-private 32-bit counters in shared memory (when they fit), added to the global 64-bit
// counters once per block; global atomics otherwise.
template <class Slot>
__global__ void log_histogram_kernel(const float* __restrict__ g, std::uint64_t n, Slot slot,
                                     unsigned long long* counts, bool shared_ok) {
  extern __shared__ unsigned int local[];
  const int slots = slot.slots();
  if (shared_ok)
    for (int s = threadIdx.x; s < slots; s += blockDim.x) local[s] = 0;
  __syncthreads();
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int s = slot(g[i]);
    if (shared_ok)
      atomicAdd(&local[s], 1u);
    else
      atomicAdd(&counts[s], 1ull);
  }
  __syncthreads();
  if (shared_ok)
    for (int s = threadIdx.x; s < slots; s += blockDim.x)
      if (local[s]) atomicAdd(&counts[s], static_cast<unsigned long long>(local[s]));
}

// Index -> f(index) as an input iterator for CUB.
template <class F>
auto mapped(F f) {
  return thrust::transform_iterator<F, thrust::counting_iterator<std::uint64_t>>(
      thrust::counting_iterator<std::uint64_t>(0), f);
}

// The events of marks no longer held, this thread's, for the next marks (kSpareMarks at most).
inline constexpr std::size_t kSpareMarks = 16;
struct SpareMarkEvents {
  std::vector<CudaStaging::Event> events;
  SpareMarkEvents() = default;
  SpareMarkEvents(const SpareMarkEvents&) = delete;
  SpareMarkEvents& operator=(const SpareMarkEvents&) = delete;
  ~SpareMarkEvents() {
    for (auto& e : events) CudaStaging{}.destroy(e);
  }
};
inline thread_local SpareMarkEvents spare_mark_events;

// A CUDA event recorded on a stream (the StagingPool's event handling: CudaStaging), taken from
// this thread's spare ones where there is one (none is made in steady state), given back after.
class CudaMark final : public DeviceMark {
 public:
  explicit CudaMark(cudaStream_t stream) {
    auto& spare = spare_mark_events.events;
    if (!spare.empty()) {
      event_ = spare.back();
      spare.pop_back();
    }
    CudaStaging{}.record(event_, stream);  // makes one where none was spare (or it is another device's)
  }
  ~CudaMark() override {
    if (spare_mark_events.events.size() < kSpareMarks)
      spare_mark_events.events.push_back(event_);
    else
      CudaStaging{}.destroy(event_);
  }
  bool done() override { return CudaStaging{}.done(event_); }
  void wait() override { CudaStaging{}.wait(event_); }

 private:
  CudaStaging::Event event_;
};

// Runs on `stream` (gradscope's, on the current device) with grids for `multiprocessors` SMs.
class CubPrims {
 public:
  CubPrims(cudaStream_t stream, int multiprocessors) : stream_(stream), sms_(multiprocessors) {}

  template <class T>
  using Buffer = DeviceBuffer<T>;

  template <class T>
  DeviceBuffer<T> alloc(std::size_t count) const {
    return DeviceBuffer<T>(count, stream_);
  }
  template <class T>
  void zero(T* p, std::size_t count) const {
    if (count == 0) return;
    work::memset();
    GS_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(T), stream_));
  }
  template <class T>
  T read(const T* p) const {
    return read_back(p, stream_);
  }
  template <class T>
  std::vector<T> download(const T* p, std::size_t count) const {
    std::vector<T> host(count);
    copy_to_host(host.data(), p, count * sizeof(T), stream_);
    return host;
  }
  template <class T>
  void upload(T* dst, const T* host, std::size_t count) const {
    copy_to_device(dst, host, count * sizeof(T), stream_);
  }
  // A device-to-device copy (queued only).
  template <class T>
  void copy(T* dst, const T* src, std::size_t count) const {
    if (count == 0) return;
    work::copy();
    GS_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDeviceToDevice, stream_));
  }
  void synchronize() const { cuda::synchronize(stream_); }
  // Pinned host memory of this thread's staging pool that kernels may write into (mapped).
  StagingLease pinned(std::size_t bytes) const { return StagingLease(staging(), bytes); }
  // CUB's temporary storage comes from *scratch (grown as needed) rather than from each call.
  void use_scratch(DeviceBuffer<unsigned char>* scratch) { scratch_ = scratch; }
  // Pinned, mapped host memory the device may write into (zeroed), and a mark after the work
  // queued so far on this stream.
  std::shared_ptr<void> host_memory(std::size_t bytes) const {
    const CudaStaging h;
    void* q = h.alloc(bytes);
    std::memset(q, 0, bytes);
    return std::shared_ptr<void>(q, [](void* m) { CudaStaging{}.free(m); });
  }
  std::unique_ptr<DeviceMark> mark() const { return std::make_unique<CudaMark>(stream_); }

  int grid_for(std::uint64_t n) const { return static_cast<int>(grid_blocks(sms_, kThreads, n)); }

  // The reduction's result stays in device memory, at `out` (nothing waits). The block partials
  // lie in the scratch workspace where one is set (the merge reads them before any later call
  // queued on the stream uses it), else in a buffer of their own.
  template <class Acc, class Elem, class Merge>
  void reduce_into(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge, Acc* out) const {
    const int grid = grid_for(n);
    DeviceBuffer<unsigned char> own;
    Acc* partials = partials_room<Acc>(grid, own);
    const bool aligned = (reinterpret_cast<std::uintptr_t>(g) & 15u) == 0;
    work::launch(grid, kThreads, n);
    reduce_kernel<Acc><<<grid, kThreads, 0, stream_>>>(g, n, aligned, elem, merge, partials);
    GS_CUDA_CHECK_LAUNCH();
    work::launch(1, kThreads);
    merge_partials_kernel<Acc><<<1, kThreads, 0, stream_>>>(partials, grid, merge, out);
    GS_CUDA_CHECK_LAUNCH();
  }
  // reduce_into, then then(0) on one thread of the device, in one launch (reduce_then_kernel):
  // *done, in device memory, must be 0 (the kernel leaves it so).
  template <class Acc, class Elem, class Merge, class Then>
  void reduce_then(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge, Acc* out, std::uint32_t* done,
                   const Then& then) const {
    const int grid = grid_for(n);
    DeviceBuffer<unsigned char> own;
    Acc* partials = partials_room<Acc>(grid, own);
    const bool aligned = (reinterpret_cast<std::uintptr_t>(g) & 15u) == 0;
    work::launch(grid, kThreads, n);
    reduce_then_kernel<Acc><<<grid, kThreads, 0, stream_>>>(g, n, aligned, elem, merge, partials,
                                                            reinterpret_cast<unsigned int*>(done), out, then);
    GS_CUDA_CHECK_LAUNCH();
  }
  template <class Acc, class Elem, class Merge>
  Acc reduce(const float* g, std::uint64_t n, const Elem& elem, const Merge& merge) const {
    DeviceBuffer<Acc> out(1, stream_);
    reduce_into(g, n, elem, merge, out.data());
    return read_back(out.data(), stream_);
  }

  template <class F>
  void for_each(std::uint64_t m, const F& f) const {
    if (m == 0) return;
    work::launch(grid_for(m), kThreads, m);
    for_each_kernel<<<grid_for(m), kThreads, 0, stream_>>>(m, f);
    GS_CUDA_CHECK_LAUNCH();
  }
  template <class Count, class F>
  void for_each_upto(const Count* d_m, std::uint64_t capacity, const F& f) const {
    if (capacity == 0) return;
    work::launch(grid_for(capacity), kThreads);
    for_each_upto_kernel<<<grid_for(capacity), kThreads, 0, stream_>>>(d_m, capacity, f);
    GS_CUDA_CHECK_LAUNCH();
  }

  template <class T, class F>
  T sum(std::uint64_t m, const F& f) const {
    DeviceBuffer<T> out(1, stream_);
    work::cub(work::Cub::reduce, m);
    cub_run(
        {work::Cub::reduce, m, 0, int(sizeof(T))},
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceReduce::Sum(temp, bytes, mapped(f), out.data(), static_cast<std::int64_t>(m), stream_);
        },
        stream_, scratch_);
    return read_back(out.data(), stream_);
  }

  // DeviceSelect has no output bound: its output is a store that drops what lands past capacity.
  template <class Index, class Pred>
  std::uint64_t select_if(std::uint64_t n, const Pred& pred, Index* out, std::uint64_t capacity) const {
    if (n == 0) return 0;
    DeviceBuffer<unsigned long long> count(1, stream_);
    select(thrust::counting_iterator<Index>(0), n, pred, out, capacity, count.data());
    return read_back(count.data(), stream_);
  }
  // select_then_kernel on the grid for n: one launch. Its elements are not counted: whether it
  // runs, and what it reads, only the device knows (the cuda-host twin counts them).
  template <class Sel, class Index, class Then>
  void select_then(std::uint64_t n, const Sel& sel, Index* out, float* values, std::uint64_t capacity,
                   std::uint64_t* count, double* weight, const portable::SelectRoom& room, const Then& then) const {
    const int grid = grid_for(n > 0 ? n : 1);
    if (room.blocks < std::uint64_t(grid) || room.epoch == 0)
      throw gs::Error("select_then: its room is not reserved for this grid (please report)");
    work::launch(grid, kThreads);
    select_then_kernel<<<grid, kThreads, 0, stream_>>>(n, sel, out, values, capacity, count, weight, room, then);
    GS_CUDA_CHECK_LAUNCH();
  }

  template <class Digit, class Then>
  void gated_histogram_then(std::uint64_t n, const Digit& digit, int bins, unsigned long long* counts,
                            const std::int32_t* gate, std::int32_t open, std::uint32_t* done, const Then& then) const {
    if (bins < 1 || bins > int(portable::kBins))
      throw gs::Error("gated_histogram_then: bins out of range (please report)");
    // Its elements are not counted: whether the gate is open, and the pass reads them, only the
    // device knows (the cuda-host twin counts them where it is).
    work::launch(grid_for(n), kThreads);
    gated_histogram_kernel<<<grid_for(n), kThreads, 0, stream_>>>(n, digit, bins, counts, gate, open,
                                                                  reinterpret_cast<unsigned int*>(done), then);
    GS_CUDA_CHECK_LAUNCH();
  }

  void log_histogram(const float* g, std::uint64_t n, const portable::LogSlots& slot,
                     unsigned long long* counts) const {
    const bool shared_ok = slot.slots() <= 12 * 1024;  // 48 KB of 32-bit counters per block
    const std::size_t shmem = shared_ok ? sizeof(unsigned int) * slot.slots() : 0;
    work::launch(grid_for(n), kThreads, n);
    log_histogram_kernel<<<grid_for(n), kThreads, shmem, stream_>>>(g, n, slot, counts, shared_ok);
    GS_CUDA_CHECK_LAUNCH();
  }

  template <class K>
  void sort_keys(const K* in, K* out, std::uint64_t m, int begin_bit, int end_bit, bool descending) const {
    work::cub(work::Cub::radix_sort, m, end_bit - begin_bit);
    cub_run(
        {work::Cub::radix_sort, m, end_bit - begin_bit, int(sizeof(K))},
        [&](void* temp, std::size_t& bytes) {
          const auto count = static_cast<std::int64_t>(m);
          return descending ? cub::DeviceRadixSort::SortKeysDescending(temp, bytes, in, out, count, begin_bit, end_bit,
                                                                       stream_)
                            : cub::DeviceRadixSort::SortKeys(temp, bytes, in, out, count, begin_bit, end_bit, stream_);
        },
        stream_, scratch_);
  }
  template <class K, class V>
  void sort_pairs(const K* kin, K* kout, const V* vin, V* vout, std::uint64_t m, int begin_bit, int end_bit,
                  bool descending) const {
    work::cub(work::Cub::radix_sort, m, end_bit - begin_bit);
    cub_run(
        {work::Cub::radix_sort, m, end_bit - begin_bit, int(sizeof(K)), int(sizeof(V))},
        [&](void* temp, std::size_t& bytes) {
          const auto count = static_cast<std::int64_t>(m);
          return descending ? cub::DeviceRadixSort::SortPairsDescending(temp, bytes, kin, kout, vin, vout, count,
                                                                        begin_bit, end_bit, stream_)
                            : cub::DeviceRadixSort::SortPairs(temp, bytes, kin, kout, vin, vout, count, begin_bit,
                                                              end_bit, stream_);
        },
        stream_, scratch_);
  }

 private:
  // Room for a grid's block partials: in the scratch workspace where one is set (grown as needed),
  // else in `own`, which the caller keeps until the kernels reading it are queued.
  template <class Acc>
  Acc* partials_room(int grid, DeviceBuffer<unsigned char>& own) const {
    const std::size_t bytes = sizeof(Acc) * static_cast<std::size_t>(grid);
    DeviceBuffer<unsigned char>* room = scratch_ ? scratch_ : &own;
    if (room->size() < bytes) *room = DeviceBuffer<unsigned char>(std::max(bytes, 2 * room->size()), stream_);
    return reinterpret_cast<Acc*>(room->data());
  }
  template <class In, class Index, class Pred, class Count>
  void select(In in, std::uint64_t m, const Pred& pred, Index* out, std::uint64_t capacity, Count* d_count) const {
    if (m == 0) {
      work::memset();
      GS_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(Count), stream_));
      return;
    }
    work::cub(work::Cub::select, m);
    const auto store = thrust::make_tabulate_output_iterator(portable::BoundedStore<Index>{out, capacity});
    cub_run(
        {work::Cub::select, m, 0, int(sizeof(Index))},
        [&](void* temp, std::size_t& bytes) {
          return cub::DeviceSelect::If(temp, bytes, in, store, d_count, static_cast<std::int64_t>(m), pred, stream_);
        },
        stream_, scratch_);
  }

  cudaStream_t stream_;
  int sms_;
  DeviceBuffer<unsigned char>* scratch_ = nullptr;
};

// One entry point of the CUDA backend: the data's device current, gradscope's stream there
// ordered after the caller's (DeviceScope), and primitives on that stream and device.
class CubCall {
 public:
  CubCall(const void* d_data, cudaStream_t caller)
      : scope_(policy(), d_data, caller),
        prims_(static_cast<cudaStream_t>(scope_.stream()), scope_.properties().multiprocessors) {}
  CubPrims& prims() { return prims_; }
  int device() const { return scope_.device(); }

 private:
  DeviceScope scope_;
  CubPrims prims_;
};

// The CUDA backend of portable::Passes and PortableSelector: each call is a CubCall after `caller`.
struct CubBackend {
  using Prims = CubPrims;
  CubCall call(const void* d_data) const { return CubCall(d_data, caller); }
  cudaStream_t caller = nullptr;
};

}  // namespace gs::kernels::cuda::detail
