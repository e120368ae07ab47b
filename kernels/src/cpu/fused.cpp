// CPU backend: statistics and compaction fused in one read of a range (cpu/compact.hpp,
// stats_above_and_compact and stats_and_compact): the AVX2 statistics pass with a packing hook,
// or the two steps one after the other without AVX2.
#include <cstdint>
#include <type_traits>

#include "compact.hpp"
#include "light_avx2.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::cpu::detail {

using kernels::detail::threshold_as_float;

#if defined(GS_LIGHT_AVX2)
namespace {
// The hook that packs the finite x > pack of every group (branchless: every group is stored, the
// position moved by its hit count), with the indices kept in a vector moved by 8 per group.
template <bool branchless>
struct PackAbove {
  __m256 pv;
  __m256i ix;
  std::int32_t* out_idx;
  float* out_val;
  std::size_t at;
  template <bool checked>
  __attribute__((target("avx2"), always_inline)) void operator()(std::bool_constant<checked>, __m256 raw, __m256 x,
                                                                 __m256 finite) {
    __m256 hit = _mm256_cmp_ps(x, pv, _CMP_GT_OQ);
    if constexpr (checked) hit = _mm256_and_ps(hit, finite);
    const int m = _mm256_movemask_ps(hit);
    if (branchless || m) at = pack_group8(raw, ix, m, out_idx, out_val, at);
    ix = _mm256_add_epi32(ix, _mm256_set1_epi32(8));
  }
};
// shifted: statistics of |g| > t shifted (stats_above's); else of every |g| (stats's).
template <bool shifted, bool squares, bool branchless>
__attribute__((target("avx2"))) fitting::MagnitudeStats stats_and_pack_avx2(const float* g, std::size_t begin,
                                                                            std::size_t end, float t, double shift,
                                                                            float pack, std::int32_t* out_idx,
                                                                            float* out_val, std::size_t& out) {
  PackAbove<branchless> hook{
      _mm256_set1_ps(pack),
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(begin)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), out_idx,
      out_val, out};
  const std::size_t n = end - begin;
  const fitting::MagnitudeStats s = light_chunk_avx2_with<shifted, squares, false>(g + begin, n, t, shift, hook);
  const std::size_t full = n - n % 8;  // the groups the hook saw; the rest by the scalar compaction
  out = compact_range(g, static_cast<const std::int32_t*>(nullptr), begin + full, end, pack, out_idx, out_val, hook.at);
  return s;
}
}  // namespace
#endif

namespace {
template <bool shifted>
fitting::MagnitudeStats stats_and_pack(const float* g, std::size_t begin, std::size_t end, double threshold,
                                       double shift, fitting::StatsFields f, float pack, std::int32_t* out_idx,
                                       float* out_val, std::size_t& out, bool dense_hits) {
#if defined(GS_LIGHT_AVX2)
  if (has_avx2() && !f.sum_log && !f.sum_signed && (!shifted || shift <= threshold) && out_val) {
    const float t = shifted ? threshold_as_float(threshold) : 0.0f;
    const auto run =
        f.sum_sq
            ? (dense_hits ? stats_and_pack_avx2<shifted, true, true> : stats_and_pack_avx2<shifted, true, false>)
            : (dense_hits ? stats_and_pack_avx2<shifted, false, true> : stats_and_pack_avx2<shifted, false, false>);
    return run(g, begin, end, t, shift, pack, out_idx, out_val, out);
  }
#endif
  const fitting::MagnitudeStats s =
      shifted ? stats_above_block(g + begin, end - begin, threshold, shift, f) : stats_block(g + begin, end - begin, f);
  out = compact_range(g, static_cast<const std::int32_t*>(nullptr), begin, end, pack, out_idx, out_val, out);
  return s;
}
}  // namespace

fitting::MagnitudeStats stats_above_and_compact(const float* g, std::size_t begin, std::size_t end, double threshold,
                                                double shift, fitting::StatsFields f, float pack, std::int32_t* out_idx,
                                                float* out_val, std::size_t& out, bool dense_hits) {
  return stats_and_pack<true>(g, begin, end, threshold, shift, f, pack, out_idx, out_val, out, dense_hits);
}
fitting::MagnitudeStats stats_and_compact(const float* g, std::size_t begin, std::size_t end, fitting::StatsFields f,
                                          float pack, std::int32_t* out_idx, float* out_val, std::size_t& out,
                                          bool dense_hits) {
  return stats_and_pack<false>(g, begin, end, 0.0, 0.0, f, pack, out_idx, out_val, out, dense_hits);
}
}  // namespace gs::kernels::cpu::detail
