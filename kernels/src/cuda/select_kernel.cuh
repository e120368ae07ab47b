#pragma once
// select_then's kernel (portable/passes.hpp's contract): a stable selection and the decision after
// it in one launch. Its host twin is cuda_host/host_prims.hpp's select_then.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../portable/bodies.hpp"
#include "cuda_common.cuh"

namespace gs::kernels::cuda::detail {

// select_then's kernel: one launch, a stable selection written in place. Every block takes a
// ticket, its place in the order (blocks that hold lower tickets have started, so waiting on them
// cannot deadlock), and with it a chunk of the elements. Where the selection is on:
//  1. the block reads its chunk in tiles (kSelectItems a thread, in order), keeps its hits'
//     positions in shared memory (kSelectStaged at most) and sums the weights;
//  2. it publishes its counts of taken and tied elements with this call's epoch, and adds up those
//     of the blocks before it (each published as soon as its chunk was read: no chain);
//  3. it writes its hits at their places: a taken one after every earlier taken one and the ties
//     kept before it, a tie while fewer than the limit came before it (a block with more hits than
//     it kept reads its chunk again).
// The last block done adds every block's counts and weights (thread t those of blocks t, t +
// kThreads, ..., then a block reduction: a fixed order for a grid, so the weight repeats bit for
// bit), writes the count and the weight, sets the tickets and its count back to 0 and runs
// then(count) on one thread.
inline constexpr int kSelectItems = 4;
struct AddSelectCounts {
  __device__ portable::SelectCounts operator()(const portable::SelectCounts& a, const portable::SelectCounts& b) const {
    return a + b;
  }
};
template <class Sel, class Index, class Then>
__global__ void __launch_bounds__(kThreads)
    select_then_kernel(std::uint64_t n, Sel sel, Index* out, float* values, std::uint64_t capacity,
                       std::uint64_t* count, double* weight, portable::SelectRoom room, Then then) {
  using Counts = portable::SelectCounts;
  using Scan = cub::BlockScan<unsigned int, kThreads>;
  using CountScan = cub::BlockScan<Counts, kThreads>;
  using CountReduce = cub::BlockReduce<Counts, kThreads>;
  using SumReduce = cub::BlockReduce<double, kThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename CountScan::TempStorage count_scan;
    typename CountReduce::TempStorage count_reduce;
    typename SumReduce::TempStorage sum;
  } temp;
  __shared__ std::uint32_t staged[portable::kSelectStaged];
  __shared__ unsigned int s_ticket;
  __shared__ unsigned long long s_prefix[2];  // taken, ties
  __shared__ bool s_last;
  if (threadIdx.x == 0) s_ticket = atomicAdd(room.ticket, 1u);
  __syncthreads();
  const std::uint64_t blk = s_ticket, grid = gridDim.x;
  if (blk >= grid) __trap();  // the tickets were not 0: a launch before this one was cut short
  const auto b = sel.bind();
  if (b.on) {
    const std::uint64_t len = b.len < n ? b.len : n, chunk = (len + grid - 1) / grid;
    const std::uint64_t begin = blk * chunk < len ? blk * chunk : len;
    const std::uint64_t end = begin + chunk < len ? begin + chunk : len;
    // 1. the chunk's hits
    Counts mine;  // this thread's
    double w = 0.0;
    std::uint64_t hits = 0;  // the block's (the same in every thread)
    for (std::uint64_t base = begin; base < end; base += std::uint64_t(kThreads) * kSelectItems) {
      unsigned f[kSelectItems];
      unsigned c = 0;
      for (int j = 0; j < kSelectItems; ++j) {
        const std::uint64_t i = base + std::uint64_t(threadIdx.x) * kSelectItems + j;
        f[j] = 0;
        if (i < end) {
          f[j] = b.flags(i);
          w += b.weight(i);
        }
        c += f[j] ? 1u : 0u;
        if (f[j] & portable::kTake)
          ++mine.taken;
        else if (f[j] & portable::kTie)
          ++mine.ties;
      }
      unsigned at = 0, tile = 0;
      Scan(temp.scan).ExclusiveSum(c, at, tile);
      __syncthreads();
      for (int j = 0; j < kSelectItems; ++j) {
        const std::uint64_t i = base + std::uint64_t(threadIdx.x) * kSelectItems + j;
        if (f[j] && hits + at < portable::kSelectStaged) staged[hits + at] = std::uint32_t(i - begin);
        at += f[j] ? 1u : 0u;
      }
      hits += tile;
    }
    const Counts block_counts = CountReduce(temp.count_reduce).Reduce(mine, AddSelectCounts{});
    __syncthreads();
    const double block_w = SumReduce(temp.sum).Sum(w);
    __syncthreads();
    // 2. publish, and add up the blocks before
    if (threadIdx.x == 0) {
      room.counts[blk] = block_counts;
      room.weights[blk] = block_w;
      __threadfence();
      *reinterpret_cast<volatile std::uint32_t*>(room.published + blk) = room.epoch;
    }
    Counts before;
    for (std::uint64_t j = threadIdx.x; j < blk; j += kThreads) {
      while (*reinterpret_cast<volatile std::uint32_t*>(room.published + j) != room.epoch) {
      }
      __threadfence();
      const auto* c = reinterpret_cast<const unsigned long long*>(room.counts + j);
      before = before + Counts{__ldcg(c), __ldcg(c + 1)};
    }
    const Counts prefix = CountReduce(temp.count_reduce).Reduce(before, AddSelectCounts{});
    if (threadIdx.x == 0) {
      s_prefix[0] = prefix.taken;
      s_prefix[1] = prefix.ties;
    }
    __syncthreads();
    // 3. the hits at their places
    const std::uint64_t limit = b.tie_limit();
    std::uint64_t taken = s_prefix[0], tied = s_prefix[1];
    const bool kept = hits <= portable::kSelectStaged;
    const std::uint64_t items = kept ? hits : end - begin;
    for (std::uint64_t base = 0; base < items; base += kThreads) {
      const std::uint64_t k = base + threadIdx.x;
      unsigned f = 0;
      std::uint64_t i = 0;
      if (k < items) {
        i = begin + (kept ? std::uint64_t(staged[k]) : k);
        f = b.flags(i);
      }
      const Counts one{(f & portable::kTake) ? 1ull : 0ull,
                       (!(f & portable::kTake) && (f & portable::kTie)) ? 1ull : 0ull};
      Counts at, tile;
      CountScan(temp.count_scan).ExclusiveScan(one, at, Counts{}, AddSelectCounts{}, tile);
      __syncthreads();
      const std::uint64_t taken_before = taken + at.taken, ties_before = tied + at.ties;
      const bool take = one.taken || (one.ties && ties_before < limit);
      const std::uint64_t pos = taken_before + (ties_before < limit ? ties_before : limit);
      if (take && pos < capacity) {
        out[pos] = Index(b.index(i));
        if (values) values[pos] = b.value(i);
      }
      taken += tile.taken;
      tied += tile.ties;
    }
  }
  // The last block done: the totals.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(room.ticket + 1, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  Counts sum;
  double w = 0.0;
  if (b.on)
    for (std::uint64_t j = threadIdx.x; j < grid; j += kThreads) {
      const auto* c = reinterpret_cast<const unsigned long long*>(room.counts + j);
      sum = sum + Counts{__ldcg(c), __ldcg(c + 1)};
      w += __ldcg(room.weights + j);
    }
  const Counts total = CountReduce(temp.count_reduce).Reduce(sum, AddSelectCounts{});
  __syncthreads();
  const double total_w = SumReduce(temp.sum).Sum(w);
  if (threadIdx.x == 0) {
    room.ticket[0] = 0;
    room.ticket[1] = 0;
    std::uint64_t m = 0;
    if (b.on) {
      const std::uint64_t limit = b.tie_limit();
      m = total.taken + (total.ties < limit ? total.ties : limit);
      *count = m;
      if (weight) *weight = total_w;
    }
    then(m);
  }
}

}  // namespace gs::kernels::cuda::detail
