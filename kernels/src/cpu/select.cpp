// CPU backend: compaction above a threshold and exact top-k (radix select over |g| bit patterns).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <limits>
#include <string>

#include "../index_range.hpp"
#include "compact.hpp"
#include "parallel.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/elementwise.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gs::kernels::cpu {
namespace {

using kernels::detail::kNonfiniteKey;
using kernels::detail::magnitude_key;
using kernels::detail::selected_above;
using kernels::detail::threshold_as_float;

constexpr std::size_t kBlock = 16;  // elements tested together before any write
constexpr int kTopBits = 11;        // pass-1 digit: bits 30..20 of the key
constexpr int kLowBits = 31 - kTopBits;
constexpr std::uint32_t kBins = 1u << kTopBits;
constexpr std::uint32_t kFiniteBins = kNonfiniteKey >> kLowBits;  // bins >= this are Inf/NaN

using detail::for_thread_ranges;
using detail::thread_count;

// One thread's share of a selection, in index order.
template <class Index>
struct Part {
  std::vector<Index> idx;
  std::vector<float> val;
  std::size_t size = 0;
  void reserve_more(std::size_t more) {
    if (size + more > idx.size()) {
      const std::size_t grown = std::max(size + more, 2 * idx.size() + 1024);
      idx.resize(grown);
      val.resize(grown);
    }
  }
};

// Branch-free append of the elements of [begin, end) that pass keep(i): blocks of kBlock are
// tested first (vectorizable), so sparse selections skip almost every block without writes.
template <class Index, class Keep>
void collect(const float* g, std::size_t begin, std::size_t end, Keep keep, Part<Index>& out) {
  std::size_t i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    unsigned hits = 0;
    for (std::size_t j = 0; j < kBlock; ++j) hits += keep(i + j) ? 1u : 0u;
    if (hits == 0) continue;
    out.reserve_more(kBlock);
    Index* idx = out.idx.data();
    float* val = out.val.data();
    std::size_t m = out.size;
    for (std::size_t j = 0; j < kBlock; ++j) {
      idx[m] = static_cast<Index>(i + j);
      val[m] = g[i + j];
      m += keep(i + j) ? 1 : 0;
    }
    out.size = m;
  }
  for (; i < end; ++i) {
    if (keep(i)) {
      out.reserve_more(1);
      out.idx[out.size] = static_cast<Index>(i);
      out.val[out.size] = g[i];
      ++out.size;
    }
  }
}

// The two-list form for top-k: in one read, elements with sure(i) go to `a`, with cand(i) to `b`.
template <class Index, class Sure, class Cand>
void collect_two(const float* g, std::size_t begin, std::size_t end, Sure sure, Cand cand, Part<Index>& a,
                 Part<Index>& b) {
  std::size_t i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    unsigned hits = 0;
    for (std::size_t j = 0; j < kBlock; ++j) hits += (sure(i + j) || cand(i + j)) ? 1u : 0u;
    if (hits == 0) continue;
    a.reserve_more(kBlock);
    b.reserve_more(kBlock);
    std::size_t ma = a.size, mb = b.size;
    for (std::size_t j = 0; j < kBlock; ++j) {
      const float v = g[i + j];
      a.idx[ma] = static_cast<Index>(i + j);
      a.val[ma] = v;
      ma += sure(i + j) ? 1 : 0;
      b.idx[mb] = static_cast<Index>(i + j);
      b.val[mb] = v;
      mb += cand(i + j) ? 1 : 0;
    }
    a.size = ma;
    b.size = mb;
  }
  for (; i < end; ++i) {
    if (sure(i)) {
      a.reserve_more(1);
      a.idx[a.size] = static_cast<Index>(i);
      a.val[a.size++] = g[i];
    } else if (cand(i)) {
      b.reserve_more(1);
      b.idx[b.size] = static_cast<Index>(i);
      b.val[b.size++] = g[i];
    }
  }
}

template <class Index, class Keep>
std::vector<Part<Index>> collect_parallel(std::span<const float> g, Keep keep) {
  const std::size_t chunks = detail::chunk_count(g.size());
  std::vector<Part<Index>> parts(
      static_cast<std::size_t>(std::max(1, std::min<int>(thread_count(), static_cast<int>(chunks)))));
  for_thread_ranges(g.size(), [&](int t, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; c += kChunk)  // chunk by chunk keeps reads in cache
      collect(g.data(), c, std::min(end, c + kChunk), keep, parts[t]);
  });
  return parts;
}

template <class Index>
void check_capacity(std::size_t need, std::span<Index> indices, std::span<float> values, const char* what) {
  if (indices.size() < need || (!values.empty() && values.size() < need))
    throw gs::Error(std::string(what) + ": output buffers hold " + std::to_string(indices.size()) + " indices and " +
                    std::to_string(values.size()) + " values but " + std::to_string(need) +
                    " are needed; size them with count_above (or k, or the input length)");
}

using detail::Scratch;

// One read of g: the elements above t of each thread's range, in index order, into scratch.
template <class Index>
std::vector<Scratch<Index>> compact_to_scratch(std::span<const float> g, float t) {
  const std::size_t chunks = detail::chunk_count(g.size());
  std::vector<Scratch<Index>> parts(
      static_cast<std::size_t>(std::max(1, std::min<int>(thread_count(), static_cast<int>(chunks)))));
  for_thread_ranges(g.size(), [&](int r, std::size_t begin, std::size_t end) {
    Scratch<Index>& p = parts[static_cast<std::size_t>(r)];
    for (std::size_t c = begin; c < end; c += kChunk) {
      const std::size_t ce = std::min(end, c + kChunk);
      p.ensure(p.size + (ce - c));  // room for a whole chunk: the packed stores need it
      p.size = detail::compact_range(g.data(), static_cast<const Index*>(nullptr), c, ce, t, p.idx.get(), p.val.get(),
                                     p.size);
    }
  });
  return parts;
}

template <class Index>
std::uint64_t compact_impl(std::span<const float> g, double threshold, std::span<Index> indices,
                           std::span<float> values) {
  check_threshold(threshold, "compact_above");
  check_index_range<Index>(g.size(), "compact_above");
  const float t = threshold_as_float(threshold);
  const std::size_t n = g.size();
  float* out_val = values.empty() ? nullptr : values.data();
  if (indices.size() >= n && (values.empty() || values.size() >= n)) {
    // Buffers of n: each thread's range compacts in place at its own offset (it keeps at most as
    // many as it reads, so ranges never overlap), then one small move closes the gaps.
    const std::size_t nt = std::max<std::size_t>(1, std::min<std::size_t>(thread_count(), detail::chunk_count(n)));
    std::vector<std::size_t> first(nt, 0), kept(nt, 0);
    for_thread_ranges(n, [&](int r, std::size_t begin, std::size_t end) {
      first[r] = begin;
      kept[r] = detail::compact_range(g.data(), static_cast<const Index*>(nullptr), begin, end, t, indices.data(),
                                      out_val, begin) -
                begin;
    });
    std::size_t at = kept[0];
    for (std::size_t r = 1; r < nt; ++r) {
      if (kept[r] && first[r] != at) {
        std::memmove(indices.data() + at, indices.data() + first[r], kept[r] * sizeof(Index));
        if (out_val) std::memmove(out_val + at, out_val + first[r], kept[r] * sizeof(float));
      }
      at += kept[r];
    }
    return at;
  }
  auto parts = compact_to_scratch<Index>(g, t);
  std::size_t total = 0;
  for (const auto& p : parts) total += p.size;
  check_capacity(total, indices, values, "compact_above");
  std::size_t at = 0;
  for (const auto& p : parts) {
    std::copy_n(p.idx.get(), p.size, indices.begin() + at);
    if (out_val) std::copy_n(p.val.get(), p.size, out_val + at);
    at += p.size;
  }
  return total;
}

template <class Index>
Selection<Index> select_impl(std::span<const float> g, double threshold) {
  check_threshold(threshold, "select_above");
  check_index_range<Index>(g.size(), "select_above");
  auto parts = compact_to_scratch<Index>(g, threshold_as_float(threshold));
  std::size_t total = 0;
  for (const auto& p : parts) total += p.size;
  Selection<Index> s;
  s.indices.resize(total);
  s.values.resize(total);
  std::size_t at = 0;
  for (const auto& p : parts) {
    std::copy_n(p.idx.get(), p.size, s.indices.begin() + at);
    std::copy_n(p.val.get(), p.size, s.values.begin() + at);
    at += p.size;
  }
  return s;
}

// Pass 1 of the radix select: counts of the top kTopBits of every key (Inf/NaN land in bins
// >= kFiniteBins and are ignored). Four interleaved sub-histograms break the store-to-load chain
// when neighbours share a bin, as gradient magnitudes mostly do.
std::vector<std::uint64_t> top_digit_histogram(std::span<const float> g) {
  std::vector<std::uint64_t> total(kBins, 0);
  const std::size_t chunks = detail::chunk_count(g.size());
#pragma omp parallel if (chunks > 1)
  {
    std::vector<std::uint32_t> sub(4 * kBins, 0);
    std::vector<std::uint64_t> local(kBins, 0);
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks); ++c) {
      const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
      const std::size_t end = std::min(g.size(), begin + kChunk);
      std::size_t i = begin;
      for (; i + 4 <= end; i += 4)
        for (std::size_t j = 0; j < 4; ++j) ++sub[j * kBins + (magnitude_key(g[i + j]) >> kLowBits)];
      for (; i < end; ++i) ++sub[magnitude_key(g[i]) >> kLowBits];
      for (std::size_t b = 0; b < kBins; ++b) {  // flush: uint32 cannot overflow within a chunk
        local[b] += std::uint64_t{sub[b]} + sub[kBins + b] + sub[2 * kBins + b] + sub[3 * kBins + b];
      }
      std::fill(sub.begin(), sub.end(), 0u);
    }
#pragma omp critical
    for (std::size_t b = 0; b < kBins; ++b) total[b] += local[b];
  }
  return total;
}

// The top digit that holds the k-th largest finite key, and how many finite keys lie in higher
// bins. Throws when k exceeds the finite count.
struct DigitChoice {
  std::uint32_t bin;
  std::uint64_t above;  // finite keys in bins > bin
};
DigitChoice choose_digit(const std::vector<std::uint64_t>& hist, std::uint64_t k, const char* what) {
  std::uint64_t cum = 0;
  for (std::uint32_t b = kFiniteBins; b-- > 0;) {
    if (cum + hist[b] >= k) return {b, cum};
    cum += hist[b];
  }
  throw gs::Error(std::string(what) + ": k = " + std::to_string(k) + " exceeds the " + std::to_string(cum) +
                  " finite elements; ask for at most that many");
}

template <class Index>
void topk_impl(std::span<const float> g, std::uint64_t k, std::span<Index> indices, std::span<float> values) {
  check_index_range<Index>(g.size(), "topk");
  check_capacity(static_cast<std::size_t>(k), indices, values, "topk");
  if (k == 0) return;
  const auto hist = top_digit_histogram(g);  // pass 1
  const DigitChoice choice = choose_digit(hist, k, "topk");
  // Pass 2: everything in a higher bin is selected; the threshold bin's members are candidates.
  const float* d = g.data();
  const std::uint32_t bin = choice.bin;
  const std::size_t chunks = detail::chunk_count(g.size());
  const std::size_t nparts =
      static_cast<std::size_t>(std::max(1, std::min<int>(thread_count(), static_cast<int>(chunks))));
  std::vector<Part<Index>> sure(nparts), cand(nparts);
  auto is_sure = [d, bin](std::size_t i) {
    const std::uint32_t key = magnitude_key(d[i]);
    return (key >> kLowBits) > bin && key < kNonfiniteKey;
  };
  auto is_cand = [d, bin](std::size_t i) { return (magnitude_key(d[i]) >> kLowBits) == bin; };
  for_thread_ranges(g.size(), [&](int t, std::size_t begin, std::size_t end) {
    collect_two(d, begin, end, is_sure, is_cand, sure[t], cand[t]);
  });
  std::vector<Index> cidx;
  std::vector<float> cval;
  for (auto& p : cand) {
    cidx.insert(cidx.end(), p.idx.begin(), p.idx.begin() + p.size);
    cval.insert(cval.end(), p.val.begin(), p.val.begin() + p.size);
  }
  const std::uint64_t r = k - choice.above;  // how many candidates to keep, 1..cidx.size()
  GS_ASSERT(r >= 1 && r <= cidx.size());
  std::vector<std::uint32_t> keys(cidx.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = magnitude_key(cval[i]);
  std::vector<std::uint32_t> tmp = keys;
  std::nth_element(tmp.begin(), tmp.begin() + (r - 1), tmp.end(), std::greater<>());
  const std::uint32_t kth = tmp[r - 1];
  std::uint64_t greater = 0;
  for (std::uint32_t key : keys) greater += key > kth ? 1u : 0u;
  std::uint64_t ties_left = r - greater;  // lowest-index ties are kept
  std::vector<Index> kidx;
  std::vector<float> kval;
  kidx.reserve(r);
  kval.reserve(r);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool keep = keys[i] > kth || (keys[i] == kth && ties_left > 0);
    if (keys[i] == kth && keep) --ties_left;
    if (keep) {
      kidx.push_back(cidx[i]);
      kval.push_back(cval[i]);
    }
  }
  // Merge the sure elements (in per-thread parts, each ascending) with the kept candidates.
  std::size_t out = 0, c = 0;
  for (auto& p : sure) {
    for (std::size_t i = 0; i < p.size; ++i) {
      while (c < kidx.size() && kidx[c] < p.idx[i]) {
        indices[out] = kidx[c];
        if (!values.empty()) values[out] = kval[c];
        ++out, ++c;
      }
      indices[out] = p.idx[i];
      if (!values.empty()) values[out] = p.val[i];
      ++out;
    }
  }
  for (; c < kidx.size(); ++c, ++out) {
    indices[out] = kidx[c];
    if (!values.empty()) values[out] = kval[c];
  }
  GS_ASSERT(out == k);
}

}  // namespace

std::uint64_t compact_above(std::span<const float> g, double threshold, std::span<std::int32_t> indices,
                            std::span<float> values) {
  return compact_impl(g, threshold, indices, values);
}
std::uint64_t compact_above(std::span<const float> g, double threshold, std::span<std::int64_t> indices,
                            std::span<float> values) {
  return compact_impl(g, threshold, indices, values);
}

Selection<std::int32_t> select_above(std::span<const float> g, double threshold) {
  return select_impl<std::int32_t>(g, threshold);
}
Selection<std::int64_t> select_above64(std::span<const float> g, double threshold) {
  return select_impl<std::int64_t>(g, threshold);
}

void topk(std::span<const float> g, std::uint64_t k, std::span<std::int32_t> indices, std::span<float> values) {
  topk_impl(g, k, indices, values);
}
void topk(std::span<const float> g, std::uint64_t k, std::span<std::int64_t> indices, std::span<float> values) {
  topk_impl(g, k, indices, values);
}

float kth_largest(std::span<const float> g, std::uint64_t k) {
  if (k == 0) throw gs::Error("kth_largest: k must be at least 1 (k = 1 is the maximum)");
  const auto hist = top_digit_histogram(g);
  const DigitChoice choice = choose_digit(hist, k, "kth_largest");
  const float* d = g.data();
  const std::uint32_t bin = choice.bin;
  auto cand =
      collect_parallel<std::int64_t>(g, [d, bin](std::size_t i) { return (magnitude_key(d[i]) >> kLowBits) == bin; });
  std::vector<std::uint32_t> keys;
  for (auto& p : cand)
    for (std::size_t i = 0; i < p.size; ++i) keys.push_back(magnitude_key(p.val[i]));
  const std::uint64_t r = k - choice.above;
  std::nth_element(keys.begin(), keys.begin() + (r - 1), keys.end(), std::greater<>());
  return kernels::detail::key_to_float(keys[r - 1]);
}

}  // namespace gs::kernels::cpu
