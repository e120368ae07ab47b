#pragma once
// Chunked parallel loops of the CPU backend. Work is split into fixed chunks of cpu::kChunk
// elements whatever the thread count, and partials are merged in chunk order, so floating-point
// results do not depend on how many threads ran.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "gs/kernels/cpu.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
// Hot loops get an AVX2 clone picked at load time; the default clone keeps the baseline ISA.
#define GS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GS_CPU_CLONES
#endif

namespace gs::kernels::cpu::detail {

inline std::size_t chunk_count(std::size_t n) { return (n + kChunk - 1) / kChunk; }

// Applies chunk_fn(const float* begin, std::size_t len) -> Partial to every chunk in parallel and
// folds the partials in chunk order with merge(Partial, Partial).
template <class Partial, class ChunkFn, class Merge>
Partial reduce_chunks(std::span<const float> g, Partial init, ChunkFn chunk_fn, Merge merge) {
  const std::size_t chunks = chunk_count(g.size());
  std::vector<Partial> parts(chunks, init);
  const float* data = g.data();
  const std::size_t n = g.size();
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks); ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    const std::size_t len = begin + kChunk <= n ? kChunk : n - begin;
    parts[c] = chunk_fn(data + begin, len);
  }
  Partial r = init;
  for (const Partial& p : parts) r = merge(r, p);
  return r;
}

// Static split of [0, chunks) into contiguous ranges, one per thread: thread t gets
// [first(t), first(t+1)). Keeps per-thread outputs in index order.
inline std::size_t thread_first_chunk(std::size_t chunks, int t, int threads) {
  return chunks * static_cast<std::size_t>(t) / static_cast<std::size_t>(threads);
}

inline int thread_count() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// The threads a loop over `chunks` chunks uses: at most one per chunk, and at most max_threads
// (0: every thread).
inline int range_threads(std::size_t chunks, int max_threads = 0) {
  const int threads = max_threads > 0 ? std::min(max_threads, thread_count()) : thread_count();
  return std::max(1, std::min<int>(threads, static_cast<int>(chunks)));
}

// Runs fn(t, first_element, end_element) over contiguous per-thread ranges of whole chunks, so
// per-thread outputs come back in index order; at most max_threads threads (0: every thread).
// Returns the thread count used.
template <class Fn>
int for_thread_ranges(std::size_t n, Fn fn, int max_threads = 0) {
  const std::size_t chunks = chunk_count(n);
  const int nt = range_threads(chunks, max_threads);
  // One iteration per range: correct even if the runtime grants fewer threads than asked.
#pragma omp parallel for schedule(static, 1) num_threads(nt)
  for (int t = 0; t < nt; ++t) {
    const std::size_t c0 = thread_first_chunk(chunks, t, nt);
    const std::size_t c1 = thread_first_chunk(chunks, t + 1, nt);
    fn(t, std::min(n, c0 * kChunk), std::min(n, c1 * kChunk));
  }
  return nt;
}

}  // namespace gs::kernels::cpu::detail
