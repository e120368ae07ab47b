// The compaction step of the CPU backend (see cpu/compact.hpp).
#include "compact.hpp"

#include <array>
#include <cmath>
#include <limits>

#include "gs/kernels/elementwise.hpp"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define GS_HAVE_AVX2_PATH 1
#endif

namespace gs::kernels::cpu::detail {
namespace {

using kernels::detail::selected_above;

constexpr std::size_t kBlock = 16;  // scalar path: elements tested together before any write

// Branch-free scalar form; blocks without hits are skipped after a vectorizable test.
template <class Index>
std::size_t compact_scalar(const float* val, const Index* src_idx, std::size_t begin, std::size_t end, float t,
                           Index* out_idx, float* out_val, std::size_t out) {
  std::size_t i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    unsigned hits = 0;
    for (std::size_t j = 0; j < kBlock; ++j) hits += selected_above(val[i + j], t) ? 1u : 0u;
    if (hits == 0) continue;
    for (std::size_t j = 0; j < kBlock; ++j) {
      const float v = val[i + j];
      const Index ix = src_idx ? src_idx[i + j] : static_cast<Index>(i + j);
      out_idx[out] = ix;
      if (out_val) out_val[out] = v;
      out += selected_above(v, t) ? 1 : 0;
    }
  }
  for (; i < end; ++i) {
    const float v = val[i];
    if (!selected_above(v, t)) continue;
    out_idx[out] = src_idx ? src_idx[i] : static_cast<Index>(i);
    if (out_val) out_val[out] = v;
    ++out;
  }
  return out;
}

#if defined(GS_HAVE_AVX2_PATH)
// Mask of the lanes of v above t: finite and |v| > t.
__attribute__((target("avx2"))) inline int keep_mask(__m256 v, __m256 tv) {
  const __m256 x = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  const __m256 above = _mm256_cmp_ps(x, tv, _CMP_GT_OQ);
  const __m256 finite = _mm256_cmp_ps(x, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ);
  return _mm256_movemask_ps(_mm256_and_ps(above, finite));
}

// Index type I: int32 (permute the loaded or computed indices) or int64 (widen the permuted lane
// numbers onto the base; candidate int64 indices take the scalar path instead).
template <class Index>
__attribute__((target("avx2"))) std::size_t compact_avx2(const float* val, const Index* src_idx, std::size_t begin,
                                                         std::size_t end, float t, Index* out_idx, float* out_val,
                                                         std::size_t out) {
  const __m256 tv = _mm256_set1_ps(t);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::size_t i = begin;
  auto group = [&](std::size_t at, __m256 v, int m) __attribute__((target("avx2"))) {
    if constexpr (sizeof(Index) == 4) {
      const __m256i ix = src_idx ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src_idx + at))
                                 : _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(at)), iota);
      out = out_val ? pack_group8<true>(v, ix, m, out_idx, out_val, out)
                    : pack_group8<false>(v, ix, m, out_idx, out_val, out);
    } else {
      const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPack.lanes[m]));
      if (out_val) _mm256_storeu_ps(out_val + out, _mm256_permutevar8x32_ps(v, perm));
      const __m256i base = _mm256_set1_epi64x(static_cast<long long>(at));
      const __m256i lo = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(perm)));
      const __m256i hi = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(perm, 1)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_idx + out), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_idx + out + 4), hi);
      out += static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(m)));
    }
  };
  // Two groups per step: sparse selections mostly take the one well-predicted branch.
  for (; i + 16 <= end; i += 16) {
    const __m256 a = _mm256_loadu_ps(val + i);
    const __m256 b = _mm256_loadu_ps(val + i + 8);
    const int ma = keep_mask(a, tv), mb = keep_mask(b, tv);
    if ((ma | mb) == 0) continue;
    if (ma) group(i, a, ma);
    if (mb) group(i + 8, b, mb);
  }
  return compact_scalar(val, src_idx, i, end, t, out_idx, out_val, out);
}
#endif

}  // namespace

std::size_t compact_range(const float* val, const std::int32_t* src_idx, std::size_t begin, std::size_t end, float t,
                          std::int32_t* out_idx, float* out_val, std::size_t out) {
#if defined(GS_HAVE_AVX2_PATH)
  if (has_avx2()) return compact_avx2(val, src_idx, begin, end, t, out_idx, out_val, out);
#endif
  return compact_scalar(val, src_idx, begin, end, t, out_idx, out_val, out);
}

std::size_t compact_range(const float* val, const std::int64_t* src_idx, std::size_t begin, std::size_t end, float t,
                          std::int64_t* out_idx, float* out_val, std::size_t out) {
#if defined(GS_HAVE_AVX2_PATH)
  if (has_avx2() && src_idx == nullptr)
    return compact_avx2<std::int64_t>(val, nullptr, begin, end, t, out_idx, out_val, out);
#endif
  return compact_scalar(val, src_idx, begin, end, t, out_idx, out_val, out);
}

}  // namespace gs::kernels::cpu::detail
