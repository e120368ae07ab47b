#pragma once
// The per-element and per-thread bodies of the CUDA backend's passes (GS_HD: compiled by nvcc for
// the device and by g++ for the host). passes.hpp composes them with the primitives of a backend:
// the CUB primitives run them on the GPU, the host primitives on the CPU (the `cuda-host`
// backend, which is how the CUDA backend's logic runs in CI without a GPU).
#include <cmath>
#include <cstdint>

#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/base/hostdevice.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::portable {

using kernels::detail::element_hash;
using kernels::detail::kNonfiniteKey;
using kernels::detail::magnitude_key;
using kernels::detail::selected_above;

// Radix top-k's split of a magnitude key: the top bits are histogrammed, the low ones resolved
// over the candidates of one bin.
inline constexpr int kTopBits = 11;
inline constexpr int kLowBits = 31 - kTopBits;
inline constexpr std::uint32_t kBins = 1u << kTopBits;
inline constexpr std::uint32_t kFiniteBins = kNonfiniteKey >> kLowBits;

// ---- the two hand-written kernels' per-thread bodies -------------------------------------------

struct Four {
  float x, y, z, w;
};
// Element group j of 4 (16-byte loads on the device, where g is 16-byte aligned).
GS_HD inline Four load_four(const float* g, std::uint64_t j) {
#if defined(__CUDA_ARCH__)
  const float4 v = reinterpret_cast<const float4*>(g)[j];
  return {v.x, v.y, v.z, v.w};
#else
  return {g[4 * j], g[4 * j + 1], g[4 * j + 2], g[4 * j + 3]};
#endif
}

// One thread of a grid-stride reduction over g: groups of 4 when g is aligned, then the tail one
// by one. Thread `tid` of `stride` threads; every element is visited by exactly one thread. An
// element step whose parameters live in device memory (a threshold the device computed) has
// bind(), which reads them once per thread: {on, the step}; off, the thread reads nothing.
template <class Acc, class Elem>
GS_HD Acc reduce_thread(const float* g, std::uint64_t n, std::uint64_t tid, std::uint64_t stride, bool aligned,
                        const Elem& elem) {
  if constexpr (requires { elem.bind(); }) {
    const auto bound = elem.bind();
    return bound.on ? reduce_thread<Acc>(g, n, tid, stride, aligned, bound.step) : Acc{};
  } else {
    Acc acc{};
    const std::uint64_t n4 = aligned ? n / 4 : 0;
    for (std::uint64_t j = tid; j < n4; j += stride) {
      const Four v = load_four(g, j);
      elem(acc, v.x);
      elem(acc, v.y);
      elem(acc, v.z);
      elem(acc, v.w);
    }
    for (std::uint64_t i = n4 * 4 + tid; i < n; i += stride) elem(acc, g[i]);
    return acc;
  }
}

// The log histogram's slot of g: 0 below lo, 1..bins the bins, bins + 1 at or above hi, then
// zeros and non-finite values (slots = bins + 4).
struct LogSlots {
  double log_lo, bins_per_log, lo, hi;
  int bins;
  GS_HD int slots() const { return bins + 4; }
  GS_HD int operator()(float g) const {
    const float x = ::fabsf(g);
    if (!(x <= 3.40282347e38f)) return slots() - 1;
    if (x == 0.0f) return slots() - 2;
    return int(kernels::detail::log_bin(x, log_lo, bins_per_log, bins, lo, hi)) + 1;
  }
};

// ---- reductions: an element step and a merge ---------------------------------------------------

struct MergeStats {
  GS_HD fitting::MagnitudeStats operator()(const fitting::MagnitudeStats& a, const fitting::MagnitudeStats& b) const {
    return gs::fitting::merge(a, b);
  }
};
struct StatsElem {
  GS_HD void operator()(fitting::MagnitudeStats& s, float g) const { kernels::detail::add_fast(s, g); }
};
// stats_above: y = x - shift over the selected x, entered as add() would (|y| in the sums, the
// signed y in sum_signed, y == 0 counted as a zero), ln |y| through fast_log as on the CPU.
struct StatsAboveElem {
  float t;
  double shift;
  GS_HD void operator()(fitting::MagnitudeStats& s, float g) const {
    if (!selected_above(g, t)) return;
    const double d = double(::fabsf(g)) - shift;
    const double y = ::fabs(d);
    if (d == 0.0) {
      ++s.zeros;
      return;
    }
    float yl = float(y);
    yl = yl > 0.0f ? yl : 1.4e-45f;
    ++s.count;
    s.sum += y;
    s.sum_sq += y * y;
    s.sum_log += kernels::detail::fast_log(yl);
    s.sum_signed += d;
    s.min = y < s.min ? y : s.min;
    s.max = y > s.max ? y : s.max;
  }
};
struct AddU64 {
  GS_HD std::uint64_t operator()(std::uint64_t a, std::uint64_t b) const { return a + b; }
};
struct CountElem {
  float t;
  GS_HD void operator()(std::uint64_t& c, float g) const { c += selected_above(g, t) ? 1u : 0u; }
};
struct MergeGp {
  GS_HD fitting::GpSums operator()(const fitting::GpSums& a, const fitting::GpSums& b) const {
    fitting::GpSums r;
    r.count = a.count + b.count;
    r.sum_log1p = a.sum_log1p + b.sum_log1p;
    r.sum_inv = a.sum_inv + b.sum_inv;
    r.sum_inv2 = a.sum_inv2 + b.sum_inv2;
    return r;
  }
};
struct GpElem {
  float t;
  double theta, shift;
  GS_HD void operator()(fitting::GpSums& s, float g) const {
    if (!selected_above(g, t)) return;
    const double z = theta * (double(::fabsf(g)) - shift);
    const double inv = 1.0 / (1.0 + z);
    ++s.count;
    s.sum_log1p += ::log1p(z);
    s.sum_inv += inv;
    s.sum_inv2 += inv * inv;
  }
};

// ---- terms of sums over an index range ---------------------------------------------------------

struct ValueAsDouble {
  const float* g;
  GS_HD double operator()(std::uint64_t i) const { return double(g[i]); }
};
struct SquareAsDouble {
  const float* g;
  GS_HD double operator()(std::uint64_t i) const { return double(g[i]) * double(g[i]); }
};

// ---- selection predicates over indices ---------------------------------------------------------

struct AbovePred {
  const float* g;
  float t;
  template <class Index>
  GS_HD bool operator()(Index i) const {
    return selected_above(g[i], t);
  }
};
// sorted_sample's filter: finite non-zero x whose hash falls below the cutoff.
struct HashBelow {
  const float* g;
  std::uint64_t seed, cutoff;
  template <class Index>
  GS_HD bool operator()(Index i) const {
    const float x = ::fabsf(g[i]);
    return x > 0.0f && x <= 3.40282347e38f && element_hash(seed, std::uint64_t(i)) < cutoff;
  }
};
struct HashBelowCount {
  HashBelow pred;
  GS_HD unsigned long long operator()(std::uint64_t i) const { return pred(i) ? 1ull : 0ull; }
};
// ---- per-element bodies of the maps (for_each over j) ------------------------------------------

struct RandomSampleBody {  // DGC's sample: |g| at hashed positions
  const float* g;
  std::uint64_t n, seed;
  float* out;
  GS_HD void operator()(std::uint64_t t) const {
    out[t] = ::fabsf(g[kernels::detail::hash_to_range(element_hash(seed, t), n)]);
  }
};
struct SpreadBody {  // the spread sample's runs, gathered into one buffer
  const float* g;
  std::uint64_t n, lines, len;
  float* out;
  GS_HD void operator()(std::uint64_t j) const {
    out[j] = g[gs::fitting::spread_line_start(n, lines, len, j / len) + j % len];
  }
};
template <class Index>
struct HashAndValueBody {  // sorted_sample: each kept element's hash and |g|
  const float* g;
  const Index* idx;
  std::uint64_t seed;
  std::uint64_t* h;
  float* x;
  GS_HD void operator()(std::uint64_t j) const {
    h[j] = element_hash(seed, std::uint64_t(idx[j]));
    x[j] = ::fabsf(g[idx[j]]);
  }
};
struct AbsBody {
  float* v;
  GS_HD void operator()(std::uint64_t j) const { v[j] = ::fabsf(v[j]); }
};
template <class Index>
struct GatherValues {
  const float* g;
  const Index* idx;
  float* out;
  GS_HD void operator()(std::uint64_t j) const { out[j] = g[idx[j]]; }
};
template <class Index>
struct GatherKeys {
  const float* g;
  const Index* idx;
  std::uint32_t* out;
  GS_HD void operator()(std::uint64_t j) const { out[j] = magnitude_key(g[idx[j]]); }
};

// ---- the DDP hook's element-wise work (vector_ops.hpp) -----------------------------------------

struct AddBody {  // out = a + b, one float add per element (as the host's residual memory does)
  const float* a;
  const float* b;
  float* out;
  GS_HD void operator()(std::uint64_t i) const { out[i] = a[i] + b[i]; }
};
struct AddAndClear {  // out = a + b, then a = 0; the flag cleared by thread 0 where given
  float* a;
  const float* b;
  float* out;
  std::int32_t* flag;
  GS_HD void operator()(std::uint64_t i) const {
    out[i] = a[i] + b[i];
    a[i] = 0.0f;
    if (flag && i == 0) *flag = 0;
  }
};
template <class T>
struct FillBody {
  T* v;
  T value;
  GS_HD void operator()(std::uint64_t i) const { v[i] = value; }
};
struct ScaleBody {
  float* v;
  float factor;
  GS_HD void operator()(std::uint64_t i) const { v[i] *= factor; }
};
struct ZeroAtBody {
  float* v;
  const std::int32_t* idx;
  GS_HD void operator()(std::uint64_t j) const { v[idx[j]] = 0.0f; }
};
struct ScatterAddBody {  // distinct indices: no two threads add to one element
  float* out;
  const std::int32_t* idx;
  const float* val;
  GS_HD void operator()(std::uint64_t j) const { out[idx[j]] += val[j]; }
};

// A selection's store: the j-th selected index goes to out[j] only while j < capacity, so a
// selection that finds more than its buffer holds writes nothing past it (the count still counts
// them all, and the caller reports the mismatch).
template <class Index>
struct BoundedStore {
  Index* out;
  std::uint64_t capacity;
  GS_HD void operator()(std::int64_t j, Index i) const {
    if (static_cast<std::uint64_t>(j) < capacity) out[j] = i;
  }
};

// What select_then keeps between calls on one device (its buffers zeroed when made): per block of
// its grid, the counts it published (SelectCounts), the epoch that says they are this call's,
// and its weight; the blocks' tickets and their count done (0 between calls, as each call leaves
// them). Each block keeps the positions of its chunk's hits in shared memory, up to
// kSelectStaged; a block with more reads its chunk again to write them.
inline constexpr std::uint64_t kSelectStaged = 4096;
// The elements a gated histogram's digit reads where its gate is open: its extent() where it has
// one (read on the device, once a thread), else n.
template <class Digit>
GS_HD std::uint64_t digit_extent(const Digit& digit, std::uint64_t n) {
  if constexpr (requires { digit.extent(); }) {
    const std::uint64_t e = digit.extent();
    return e < n ? e : n;
  } else {
    return n;
  }
}
// A block's or a prefix's counts of taken and tied elements (select_then).
struct SelectCounts {
  unsigned long long taken = 0, ties = 0;
  GS_HD SelectCounts operator+(const SelectCounts& o) const { return {taken + o.taken, ties + o.ties}; }
};
struct SelectRoom {
  SelectCounts* counts = nullptr;
  std::uint32_t* published = nullptr;
  double* weights = nullptr;
  std::uint32_t* ticket = nullptr;  // ticket[0]: the blocks' tickets, ticket[1]: the blocks done
  std::uint64_t blocks = 0;
  std::uint32_t epoch = 0;
};
// What a selection's flags(i) says of element i (select_then): taken, or a tie, taken while fewer
// than its tie limit came before it.
inline constexpr unsigned kTake = 1u, kTie = 2u;

}  // namespace gs::kernels::portable
