#pragma once
// The CUDA backend's passes, written once over a backend's primitives P (bodies.hpp holds their
// per-element code). cuda/cub_prims.cuh implements P with CUB and hand-written kernels and
// runs them on the GPU; cuda_host/host_prims.hpp implements P on the CPU (the `cuda-host`
// backend), so the tests run this logic against the naive oracle without a GPU.
//
// What P provides (pointers are in P's memory: device memory for CUB, host memory on the host):
//   P::Buffer<T>            owning, movable array; data(), size()
//   alloc<T>(count)         a Buffer of count elements (uninitialized)
//   zero(T*, count), copy(T*, const T*, count) (device to device)
//   read(const T*) -> T, download(const T*, count) -> vector<T>   (the host waits: counted)
//   upload(T*, const T* host, count)    queued from a pinned staging block (returns at once)
//   synchronize()                       the host waits for the stream (counted)
//   pinned(bytes)                       a pinned, mapped staging block the device may write into
//   host_memory(bytes), mark()          host memory the device writes into; an event (DeviceMark)
//   use_scratch(Buffer<unsigned char>*) CUB's temporary storage from a caller's workspace
//   reduce<Acc>(g, n, elem, merge)      grid-stride reduction (reduce_thread), partials in order
//   reduce_into<Acc>(g, n, elem, merge, Acc* out)   the same, the result left in device memory
//   reduce_then<Acc>(g, n, elem, merge, out, done, then)   the same, then then(0) on one thread,
//                                       in one launch (*done: 0 in device memory, left 0)
//   for_each(m, f)                      f(j) for every j < m
//   for_each_upto(const Count* m, capacity, f)      f(j) for j < min(*m, capacity) (*m on the device)
//   sum<T>(m, f)                        sum of f(j), j < m
//   select_if(n, pred, Index* out, capacity)   stable: the i < n with pred(i), ascending, the
//                                       first `capacity` of them written; returns the full count
//   select_then(n, sel, out, values, capacity, count, weight, room, then)   one launch: where
//                                       sel.bind().on (read on the device), a stable selection of
//                                       the i < len (bind().len <= n) that flags(i) takes (kTake, or
//                                       kTie while fewer than tie_limit() ties came before i):
//                                       out[j] = index(i), values[j] = value(i) (when values) for
//                                       j < capacity, *count = the full count, *weight = the sum of
//                                       weight(i) over every i read; closed, nothing is read or
//                                       written; then(count) on one thread after either (room:
//                                       SelectRoom, from a SelectRoomBuffers reserved for n)
//   gated_histogram_then(n, digit, bins, counts, gate, open, done, then)   where *gate == open (read
//                                       on the device): counts[b] = #{i < n : digit(i) == b}, b < bins
//                                       (zeros before, zeros after), then(those counts) on one
//                                       thread, in one launch; else nothing is read (bins <= kBins;
//                                       digit.extent(): the elements it reads, <= n)
//   sort_keys(in, out, m, begin_bit, end_bit, descending)            radix order, stable
//   sort_pairs(kin, kout, vin, vout, m, begin_bit, end_bit, descending)
//   log_histogram(g, n, LogSlots, counts)  counts[slot(g[i])] += 1
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../index_range.hpp"
#include "bodies.hpp"
#include "resident_bodies.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels::portable {

template <class P, class T>
using Buffer = typename P::template Buffer<T>;

// select_then's room (SelectRoom, bodies.hpp) on one device, its buffers zeroed when made.
template <class P>
struct SelectRoomBuffers {
  Buffer<P, SelectCounts> counts;
  Buffer<P, std::uint32_t> published, ticket;
  Buffer<P, double> weights;
  std::uint32_t epoch = 0;

  // Room for selections over up to n elements (grown, never shrunk; nothing made once large enough).
  void reserve(P& p, std::uint64_t n) {
    const std::uint64_t blocks = std::uint64_t(p.grid_for(std::max<std::uint64_t>(n, 1)));
    if (published.size() < blocks) {
      counts = p.template alloc<SelectCounts>(blocks);
      weights = p.template alloc<double>(blocks);
      published = p.template alloc<std::uint32_t>(blocks);
      p.zero(published.data(), blocks);
      epoch = 0;
    }
    if (ticket.size() < 2) {
      ticket = p.template alloc<std::uint32_t>(2);
      p.zero(ticket.data(), 2);
    }
  }
  // A call's view: a new epoch (never 0, which the buffers hold when made).
  SelectRoom next() {
    if (++epoch == 0) epoch = 1;
    return {counts.data(), published.data(), weights.data(), ticket.data(), published.size(), epoch};
  }
};

// ---- one-read passes ---------------------------------------------------------------------------

template <class P>
double sum(P& p, const float* g, std::uint64_t n) {
  return n == 0 ? 0.0 : p.template sum<double>(n, ValueAsDouble{g});
}

template <class P>
fitting::MagnitudeStats stats(P& p, const float* g, std::uint64_t n) {
  return n == 0 ? fitting::MagnitudeStats{}
                : p.template reduce<fitting::MagnitudeStats>(g, n, StatsElem{}, MergeStats{});
}

template <class P>
fitting::MagnitudeStats stats_above(P& p, const float* g, std::uint64_t n, double threshold, double shift) {
  check_threshold(threshold, "stats_above");
  if (!std::isfinite(shift)) throw gs::Error("stats_above: shift must be finite");
  if (n == 0) return fitting::MagnitudeStats{};
  return p.template reduce<fitting::MagnitudeStats>(
      g, n, StatsAboveElem{kernels::detail::threshold_as_float(threshold), shift}, MergeStats{});
}

template <class P>
std::uint64_t count_above(P& p, const float* g, std::uint64_t n, double threshold) {
  check_threshold(threshold, "count_above");
  if (n == 0) return 0;
  return p.template reduce<std::uint64_t>(g, n, CountElem{kernels::detail::threshold_as_float(threshold)}, AddU64{});
}

template <class P>
fitting::GpSums gp_sums(P& p, const float* g, std::uint64_t n, double theta, double threshold, double shift) {
  check_threshold(threshold, "gp_sums");
  if (!std::isfinite(theta) || !std::isfinite(shift)) throw gs::Error("gp_sums: theta and shift must be finite");
  if (n == 0) return fitting::GpSums{};
  return p.template reduce<fitting::GpSums>(g, n, GpElem{kernels::detail::threshold_as_float(threshold), theta, shift},
                                            MergeGp{});
}

template <class P>
LogHistogram log_histogram(P& p, const float* g, std::uint64_t n, double lo, double hi, int bins) {
  check_log_histogram_args(lo, hi, bins);
  const double log_lo = std::log(lo);
  const LogSlots slot{log_lo, bins / (std::log(hi) - log_lo), lo, hi, bins};
  const std::size_t slots = static_cast<std::size_t>(slot.slots());
  auto counts = p.template alloc<unsigned long long>(slots);
  p.zero(counts.data(), slots);
  if (n > 0) p.log_histogram(g, n, slot, counts.data());
  return log_histogram_from_slots(lo, hi, p.download(counts.data(), slots));
}

// ---- compaction and exact top-k ----------------------------------------------------------------

template <class P, class Index>
void gather(P& p, const float* g, const Index* idx, std::uint64_t m, float* values) {
  if (values && m > 0) p.for_each(m, GatherValues<Index>{g, idx, values});
}

// The elements above threshold (finite, |g| > t), stable, into buffers of `capacity`: one bounded
// selection counts and writes, so nothing lands past capacity, and a selection larger than
// capacity throws (no values written). passes: 1.
template <class P, class Index>
std::uint64_t compact_above(P& p, const float* g, std::uint64_t n, double threshold, Index* indices, float* values,
                            std::uint64_t capacity) {
  check_threshold(threshold, "compact_above");
  check_index_range<Index>(n, "compact_above");
  const std::uint64_t m =
      n == 0 ? 0 : p.select_if(n, AbovePred{g, kernels::detail::threshold_as_float(threshold)}, indices, capacity);
  if (m > capacity)
    throw gs::Error("compact_above: output buffers hold " + std::to_string(capacity) + " but " + std::to_string(m) +
                    " are needed; size them with count_above (or n)");
  gather(p, g, indices, m, values);
  p.synchronize();
  return m;
}

// Radix select of the k-th largest key of the source in `mode` (resident_bodies.hpp): three
// histogram passes, one per digit, each ended by its last block's step that finds the digit of the
// k-th key (the last digit's followed by `last`): three launches. A pass whose mode is off reads
// nothing (its gate is the state's mode, read on the device). hist: kBins zeros, left so.
// Everything stays on the device.
template <class P, class Last = NoStep>
void radix_select(P& p, ResidentState* st, unsigned long long* hist, const TopkSource& src, std::int32_t mode,
                  Last last = {}) {
  for (int d = 0; d < kRadixDigits; ++d) {
    const RadixDigit digit{src, st, d, mode};
    if (d + 1 < kRadixDigits)
      p.gated_histogram_then(src.len, digit, radix_bins(d), hist, &st->mode, mode, &st->reduce_done,
                             RadixStepFrom{st, d, mode});
    else
      p.gated_histogram_then(src.len, digit, radix_bins(d), hist, &st->mode, mode, &st->reduce_done,
                             RadixStepThen<Last>{RadixStepFrom{st, d, mode}, last});
  }
}

// The source's exact top-k when the decisions so far chose it (mode topk; k in st->topk_k): the
// k-th largest key, then one selection of the keys above it and the lowest-index ties at it up to
// the rank wanted (out, values: room for `room`; count in st->picked), followed by `then`. Reads
// the source four times when it runs, none otherwise: four launches.
template <class P, class Index, class Then = NoStep>
void exact_topk(P& p, ResidentState* st, unsigned long long* hist, const TopkSource& src, Index* out, float* values,
                std::uint64_t room, const SelectRoom& sroom, Then then = {}) {
  radix_select(p, st, hist, src, kModeTopk);
  p.select_then(src.len, TopkSel{src, st}, out, values, room, &st->picked, &st->weight, sroom, then);
}

// Every finite x counted into st->counted; TakeFinite reports the non-finite and starts the rule,
// after `first` (a selection's StartState, where this is its first pass).
template <class P, class First = NoStep>
void count_finite(P& p, ResidentState* st, const float* g, std::uint64_t n, First first = {}) {
  p.reduce_then(g, n, CountElem{kernels::detail::threshold_as_float(-1.0)}, AddU64{}, &st->counted, &st->reduce_done,
                Both{first, TakeFinite{st}});
}

// A state for the exact top-k of k (k <= n) read back once at the end of the free functions.
inline ResidentState topk_state(std::uint64_t n, std::uint64_t k) {
  ResidentState s;
  s.rule = kRuleTopk;
  s.n = n;
  s.k = k;
  return s;
}

// Exactly k indices (ascending) and values: key > T, plus the lowest-index ties at T. gs::Error
// when k exceeds the finite elements. passes: 5 (the finite count, three digits, the selection);
// one value comes back.
template <class P, class Index>
void topk(P& p, const float* g, std::uint64_t n, std::uint64_t k, Index* indices, float* values) {
  check_index_range<Index>(n, "topk");
  if (k == 0) return;
  auto st = p.template alloc<ResidentState>(1);
  auto hist = p.template alloc<unsigned long long>(kBins);
  p.zero(hist.data(), kBins);
  SelectRoomBuffers<P> room;
  room.reserve(p, n);
  p.for_each(1, SetState{st.data(), topk_state(n, std::min(k, n))});
  count_finite(p, st.data(), g, n);
  auto own = values ? Buffer<P, float>{} : p.template alloc<float>(k);
  exact_topk(p, st.data(), hist.data(), TopkSource{g, n}, indices, values ? values : own.data(), k, room.next());
  const ResidentState done = p.read(st.data());
  if (k > n - done.report.nonfinite)
    throw gs::Error("topk: k = " + std::to_string(k) + " exceeds the " + std::to_string(n - done.report.nonfinite) +
                    " finite elements; ask for at most that many");
  if (done.picked != k)
    throw gs::Error("topk: the selection found " + std::to_string(done.picked) +
                    " elements for k = " + std::to_string(k) + "; was the vector modified while it was read?");
}

template <class P>
float kth_largest(P& p, const float* g, std::uint64_t n, std::uint64_t k) {
  if (k == 0) throw gs::Error("kth_largest: k must be at least 1 (k = 1 is the maximum)");
  auto st = p.template alloc<ResidentState>(1);
  auto hist = p.template alloc<unsigned long long>(kBins);
  p.zero(hist.data(), kBins);
  ResidentState init = topk_state(n, k);
  init.mode = kModeTopk;
  init.topk_k = k;
  p.for_each(1, SetState{st.data(), init});
  radix_select(p, st.data(), hist.data(), TopkSource{g, n}, kModeTopk);
  const ResidentState done = p.read(st.data());
  if (!done.radix.found)
    throw gs::Error("kth_largest: k = " + std::to_string(k) + " exceeds the " +
                    std::to_string(count_above(p, g, n, -1.0)) + " finite elements; ask for at most that many");
  return kernels::detail::key_to_float(done.radix.prefix);
}

// ---- samples -----------------------------------------------------------------------------------

template <class P>
void random_sample(P& p, const float* g, std::uint64_t n, std::uint64_t m, std::uint64_t seed, float* out) {
  if (m == 0) return;
  if (n == 0) throw gs::Error("random_sample: cannot sample from an empty vector");
  p.for_each(m, RandomSampleBody{g, n, seed, out});
}

template <class P>
std::vector<float> spread_sample(P& p, const float* g, std::uint64_t n, std::uint64_t lines, std::uint64_t len) {
  if (lines == 0 || len == 0) throw gs::Error("spread_sample: lines and their length must be >= 1");
  if (n < lines * len) return p.download(g, n);
  auto out = p.template alloc<float>(lines * len);
  p.for_each(lines * len, SpreadBody{g, n, lines, len, out.data()});
  return p.download(out.data(), lines * len);
}

template <class P>
std::vector<double> sort_to_host(P& p, const float* x, std::uint64_t m) {
  auto sorted = p.template alloc<float>(m);
  if (m > 0) p.sort_keys(x, sorted.data(), m, 0, 32, false);
  const std::vector<float> host = p.download(sorted.data(), m);
  return std::vector<double>(host.begin(), host.end());
}

// As cpu::sorted_sample: the same elements for the same seed (smallest hashes).
template <class P>
std::vector<double> sorted_sample(P& p, const float* g, std::uint64_t n, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled) {
  if (max_points == 0) throw gs::Error("sorted_sample: max_points must be at least 1");
  const std::uint64_t finite_nonzero = count_above(p, g, n, 0.0);  // pass 1
  if (finite_nonzero <= max_points) {
    auto idx = p.template alloc<std::int64_t>(finite_nonzero);
    auto x = p.template alloc<float>(finite_nonzero);
    compact_above(p, g, n, 0.0, idx.data(), x.data(), finite_nonzero);  // pass 2
    if (finite_nonzero > 0) p.for_each(finite_nonzero, AbsBody{x.data()});
    if (subsampled) *subsampled = false;
    return sort_to_host(p, x.data(), finite_nonzero);
  }
  // As on the CPU: keep hashes below a cutoff (about 1.1 max_points survive), retry with 4p if too
  // few did, then the max_points smallest hashes (stable radix sort: ties by index, as the CPU).
  double prob = kernels::detail::sample_keep_probability(max_points, finite_nonzero);
  for (;;) {
    const std::uint64_t cutoff = kernels::detail::sample_hash_cutoff(prob);
    const HashBelow pred{g, seed, cutoff};
    const std::uint64_t kept = p.template sum<unsigned long long>(n, HashBelowCount{pred});
    if (kept < max_points) {
      if (prob >= 1.0) throw kernels::detail::sample_count_changed(finite_nonzero, kept);
      prob = std::min(1.0, 4.0 * prob);
      continue;
    }
    auto idx = p.template alloc<std::int64_t>(kept);
    if (const std::uint64_t got = p.select_if(n, pred, idx.data(), kept); got != kept)
      throw gs::Error("sorted_sample: the counting pass kept " + std::to_string(kept) +
                      " elements but the selection found " + std::to_string(got) +
                      "; was the vector modified while it was read?");
    auto h = p.template alloc<std::uint64_t>(kept);
    auto h_sorted = p.template alloc<std::uint64_t>(kept);
    auto x = p.template alloc<float>(kept);
    auto x_sorted = p.template alloc<float>(kept);
    p.for_each(kept, HashAndValueBody<std::int64_t>{g, idx.data(), seed, h.data(), x.data()});
    p.sort_pairs(h.data(), h_sorted.data(), x.data(), x_sorted.data(), kept, 0, 64, false);
    if (subsampled) *subsampled = true;
    return sort_to_host(p, x_sorted.data(), max_points);
  }
}

// ---- sidco-topk --------------------------------------------------------------------------------

// sidco-topk's selection (gs::SidcoTopkBound): the sample places a bound, one read packs every
// finite x above it, and the min(k, finite) largest candidates are taken (stable descending sort
// of their keys: ties keep the lowest indices, as topk), their indices sorted back ascending.
template <class P, class Index>
struct TopkSelection {
  Buffer<P, Index> indices;
  Buffer<P, float> values;
  std::uint64_t count = 0;
  double threshold = 0.0;        // the k-th largest |g| (0 when nothing is selected)
  int reads = 0;                 // reads of g for candidates (1 + fallbacks)
  int stages = 0;                // SIDCo stages fitted on the sample
  std::uint64_t candidates = 0;  // the first read's
};

// workspace: a buffer of at least n indices the caller keeps between calls for the candidates
// (null: allocated here).
template <class P, class Index>
TopkSelection<P, Index> sidco_topk(P& p, const float* g, std::uint64_t n, double density, int stages,
                                   fitting::SidcoTopkBound& plan, Buffer<P, Index>* workspace = nullptr) {
  check_index_range<Index>(n, "sidco-topk");
  plan.reset(n, density, stages);
  TopkSelection<P, Index> r;
  double bound = plan.first(
      spread_sample(p, g, n, fitting::SidcoTopkBound::sample_lines(n), fitting::SidcoTopkBound::kLineLength));
  Buffer<P, Index> own;
  if (!workspace || workspace->size() < n) {
    own = p.template alloc<Index>(n);
    workspace = &own;
  }
  Buffer<P, Index>& cand = *workspace;
  std::uint64_t m = 0, finite = std::numeric_limits<std::uint64_t>::max();
  for (;;) {
    m = n == 0 ? 0 : p.select_if(n, AbovePred{g, kernels::detail::threshold_as_float(bound)}, cand.data(), n);
    if (plan.reads() == 1) r.candidates = m;
    if (m < plan.k() && finite == std::numeric_limits<std::uint64_t>::max())
      finite = count_above(p, g, n, -1.0);  // only on a shortfall: is every finite x in?
    if (plan.holds(m, std::min(finite, n))) break;
    bound = plan.lower();
  }
  const std::uint64_t k = std::min(plan.k(), m);
  r.reads = plan.reads();
  r.stages = plan.stages_run();
  r.count = k;
  r.indices = p.template alloc<Index>(k);
  r.values = p.template alloc<float>(k);
  if (k == 0) return r;
  auto keys = p.template alloc<std::uint32_t>(m);
  auto keys_sorted = p.template alloc<std::uint32_t>(m);
  auto order = p.template alloc<Index>(m);
  p.for_each(m, GatherKeys<Index>{g, cand.data(), keys.data()});
  p.sort_pairs(keys.data(), keys_sorted.data(), cand.data(), order.data(), m, 0, 31, true);
  p.sort_keys(order.data(), r.indices.data(), k, 0, int(8 * sizeof(Index)), false);
  gather(p, g, r.indices.data(), k, r.values.data());
  r.threshold = kernels::detail::key_to_float(p.read(keys_sorted.data() + (k - 1)));
  p.synchronize();
  return r;
}

// The summary a Selector reports (nonfinite is not counted here: no pass takes it).
template <class P, class Index>
SidcoSelectResult topk_result(const TopkSelection<P, Index>& r) {
  SidcoSelectResult s;
  s.threshold = r.threshold;
  s.stages = r.stages;
  s.selected = r.count;
  s.full_reads = r.reads;
  s.candidates = r.candidates;
  return s;
}

// sidco-topk with the selection copied to the host (what a compressor sends).
template <class P>
SidcoSelectResult sidco_topk(P& p, const float* g, std::uint64_t n, double density, int stages,
                             Selection<std::int32_t>& out) {
  fitting::SidcoTopkBound plan(n, density, stages);
  const auto r = sidco_topk<P, std::int32_t>(p, g, n, density, stages, plan);
  out.indices = p.download(r.indices.data(), r.count);
  out.values = p.download(r.values.data(), r.count);
  return topk_result(r);
}

// ---- gs::MagnitudePasses over a backend ---------------------------------------------------------

// A backend B: B::Prims is its P, and B::call(data) gives what one entry point runs with: an
// object whose prims() is a P for the device of `data` (the CUDA backend's holds a DeviceScope:
// that device current, gradscope's stream ordered after the caller's; the host's holds nothing).
template <class B>
class Passes final : public gs::fitting::MagnitudePasses {
  using P = typename B::Prims;

 public:
  // Over g in B's memory (not owned; must outlive the object).
  Passes(B backend, const float* g, std::uint64_t n) : b_(std::move(backend)), g_(g), n_(n) {}
  // Over a copy of host data in B's memory (one upload).
  Passes(B backend, std::span<const float> host) : b_(std::move(backend)), n_(host.size()) {
    auto call = b_.call(nullptr);
    owned_ = call.prims().template alloc<float>(host.size());
    call.prims().upload(owned_.data(), host.data(), host.size());
    g_ = owned_.data();
  }
  std::uint64_t size() const override { return n_; }
  fitting::MagnitudeStats stats() override {
    return run([&](P& p) { return portable::stats(p, g_, n_); });
  }
  fitting::MagnitudeStats stats_above(double t, double shift) override {
    return run([&](P& p) { return portable::stats_above(p, g_, n_, t, shift); });
  }
  std::uint64_t count_above(double t) override {
    return run([&](P& p) { return portable::count_above(p, g_, n_, t); });
  }
  fitting::GpSums gp_sums(double theta, double t, double shift) override {
    return run([&](P& p) { return portable::gp_sums(p, g_, n_, theta, t, shift); });
  }
  std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) override {
    return run([&](P& p) { return portable::sorted_sample(p, g_, n_, max_points, seed, subsampled); });
  }
  double kth_largest(std::uint64_t k) override {
    return run([&](P& p) { return double(portable::kth_largest(p, g_, n_, k)); });
  }
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override {
    return run([&](P& p) {
      auto out = p.template alloc<float>(m);
      portable::random_sample(p, g_, n_, m, seed, out.data());
      return p.download(out.data(), m);
    });
  }
  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t len) override {
    return run([&](P& p) { return portable::spread_sample(p, g_, n_, lines, len); });
  }

 private:
  template <class F>
  auto run(F f) {
    auto call = b_.call(g_);
    return f(call.prims());
  }

  B b_;
  Buffer<P, float> owned_;
  const float* g_ = nullptr;
  std::uint64_t n_ = 0;
};

}  // namespace gs::kernels::portable
