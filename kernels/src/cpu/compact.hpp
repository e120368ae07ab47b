#pragma once
// The compaction step of the CPU backend: append the elements of a range that are above a
// threshold (finite, |v| > t) to index/value outputs, in order, in one read. With AVX2 each group
// of 8 is tested with two compares, and a group with hits is left-packed by one permute from a
// 256-entry table (the lanes of its set mask bits first) and stored whole; the store may write up
// to 8 lanes past the kept ones, so an output needs room for as many elements as the range has
// (then the stores never pass the range's own share). Groups without hits cost the compares only,
// so sparse selections run at read speed. Without AVX2 (or for int64 indices) a branch-free
// scalar loop over the blocks that have hits does the same.
//
// In-place use is allowed: out_val/out_idx may alias val/src_idx when the write position never
// passes the read position (it cannot: at most as many are written as were read).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gs/fitting/passes.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gs::kernels::cpu::detail {

// Appends the kept elements of val[begin, end) at out_idx/out_val + out; returns the new out.
// Index of element i: src_idx[i] when src_idx is set, else i. out_val may be null (no values).
std::size_t compact_range(const float* val, const std::int32_t* src_idx, std::size_t begin, std::size_t end, float t,
                          std::int32_t* out_idx, float* out_val, std::size_t out);
std::size_t compact_range(const float* val, const std::int64_t* src_idx, std::size_t begin, std::size_t end, float t,
                          std::int64_t* out_idx, float* out_val, std::size_t out);

// A growable index/value output that is never value-initialized (fresh pages are touched only as
// written).
template <class Index>
struct Scratch {
  std::unique_ptr<Index[]> idx;
  std::unique_ptr<float[]> val;
  std::size_t size = 0, cap = 0;
  void ensure(std::size_t need) {
    if (need <= cap) return;
    const std::size_t grown = std::max(need, 2 * cap);
    auto i2 = std::make_unique_for_overwrite<Index[]>(grown);
    auto v2 = std::make_unique_for_overwrite<float[]>(grown);
    std::copy_n(idx.get(), size, i2.get());
    std::copy_n(val.get(), size, v2.get());
    idx = std::move(i2);
    val = std::move(v2);
    cap = grown;
  }
};

// Statistics of y = |v| - shift over the finite |v| > t of one block (cpu::stats_above's chunk
// loop), for passes that organise their own blocks.
fitting::MagnitudeStats stats_above_block(const float* v, std::size_t n, double threshold, double shift,
                                          fitting::StatsFields fields);

// The same over every |v| (cpu::stats's chunk loop).
fitting::MagnitudeStats stats_block(const float* v, std::size_t n, fitting::StatsFields fields);

// One read of g[begin, end): stats_above_block's statistics (of |g| > threshold, shifted) and the
// compaction of the finite |g| > pack (pack above the threshold) at out_idx/out_val + out (room
// for end - begin more), in the same loop over 8-lane groups. Returns the statistics; out moves.
// dense_hits: store every group's (possibly empty) packing without a branch, for blocks where many
// groups have a hit (an unpredictable branch costs more there than the stores); else only groups
// with hits are stored.
fitting::MagnitudeStats stats_above_and_compact(const float* g, std::size_t begin, std::size_t end, double threshold,
                                                double shift, fitting::StatsFields fields, float pack,
                                                std::int32_t* out_idx, float* out_val, std::size_t& out,
                                                bool dense_hits = false);

// The same with the statistics of every |g| (cpu::stats's chunk loop) instead of the shifted ones.
fitting::MagnitudeStats stats_and_compact(const float* g, std::size_t begin, std::size_t end,
                                          fitting::StatsFields fields, float pack, std::int32_t* out_idx,
                                          float* out_val, std::size_t& out, bool dense_hits = false);

#if defined(__GNUC__) && defined(__x86_64__)
inline bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// Row m: the lanes of the set bits of m in ascending order, then the rest (never read).
struct alignas(32) PackTable {
  std::uint32_t lanes[256][8];
};
constexpr PackTable make_pack_table() {
  PackTable p{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned k = 0;
    for (unsigned b = 0; b < 8; ++b)
      if (m & (1u << b)) p.lanes[m][k++] = b;
    for (unsigned b = 0; k < 8; ++b) p.lanes[m][k++] = b;
  }
  return p;
}
inline constexpr PackTable kPack = make_pack_table();

// AVX2 only: appends the lanes of mask m of v (values) and ix (their int32 indices) at out and
// returns the new out; writes 8 lanes (room needed), keeps popcount(m); without values, out_val
// is not touched. Inline: fused loops call it per group.
template <bool values = true>
__attribute__((target("avx2"))) inline std::size_t pack_group8(__m256 v, __m256i ix, int m, std::int32_t* out_idx,
                                                               float* out_val, std::size_t out) {
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPack.lanes[m]));
  if constexpr (values) _mm256_storeu_ps(out_val + out, _mm256_permutevar8x32_ps(v, perm));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_idx + out), _mm256_permutevar8x32_epi32(ix, perm));
  return out + static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(m)));
}
#endif

}  // namespace gs::kernels::cpu::detail
