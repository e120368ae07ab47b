#pragma once
// Selections made and kept where the vector lives (the CUDA backend's device; cuda-host's fake
// one): SIDCo's stages and count correction, DGC's sampled threshold, sidco-topk's bound from its
// sample, exact top-k by radix select and the compaction above a threshold, every decision taken
// on the device from counts and sums that stay there (resident_bodies.hpp), with nothing read back
// and nothing waited for. The selection and its report stay in the workspace; fetch_selection()
// brings them to the host with one synchronization. Written once over a backend's primitives P
// (passes.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"
#include "passes.hpp"
#include "resident_bodies.hpp"

namespace gs::kernels::portable {

// A selection's buffers on one device, kept from call to call (grown, never shrunk).
template <class P>
struct ResidentWorkspace {
  int device = -1;
  Buffer<P, ResidentState> state;
  Buffer<P, unsigned long long> hist;
  Buffer<P, std::int32_t> idx, cand;
  Buffer<P, float> val, sample, cand_val, runs;
  Buffer<P, unsigned char> scratch;  // CUB's temporary storage
  SelectRoomBuffers<P> select;       // select_then's

  // Room for a selection of up to n pairs, a sample of m, c candidates (sidco-topk's) and the
  // counts of r sample runs, on `dev`.
  void reserve(P& p, int dev, std::uint64_t n, std::uint64_t m, std::uint64_t c = 0, std::uint64_t r = 0) {
    if (dev != device) *this = ResidentWorkspace{};
    device = dev;
    if (state.size() < 1) {  // zeros: a selection's first pass counts its blocks done in it
      state = p.template alloc<ResidentState>(1);
      p.zero(state.data(), 1);
    }
    if (hist.size() < kBins) {  // zeros, as every radix select leaves it
      hist = p.template alloc<unsigned long long>(kBins);
      p.zero(hist.data(), kBins);
    }
    grow(p, idx, std::max<std::uint64_t>(n, 1));
    grow(p, val, std::max<std::uint64_t>(n, 1));
    select.reserve(p, n);
    grow(p, sample, std::max<std::uint64_t>(m, 1));
    grow(p, cand, std::max<std::uint64_t>(c, 1));
    grow(p, cand_val, std::max<std::uint64_t>(c, 1));
    grow(p, runs, std::max<std::uint64_t>(r, 1));
  }
  template <class T>
  static void grow(P& p, Buffer<P, T>& b, std::uint64_t count) {
    if (b.size() < count) b = p.template alloc<T>(count);
  }
};

// The ties the radix select may keep (at most the target count) and DGC's sample size.
inline std::uint64_t request_k(const SelectRequest& r, std::uint64_t n) {
  if (r.rule == SelectRequest::Rule::topk || r.rule == SelectRequest::Rule::top_nonzero) return std::min(r.k, n);
  if (r.rule == SelectRequest::Rule::above || n == 0) return 0;
  return fitting::target_count(n, r.density);
}
inline std::uint64_t dgc_sample_size(std::uint64_t n) { return std::uint64_t(std::ceil(0.01 * double(n))); }

// sidco-topk's spread sample (SidcoTopkBound's runs; g itself when shorter than them), its runs,
// and the room of the candidates above its bound: more than the bound leaves above it at the
// sample's margin (about 1.2 k at 1e8 and density 0.01); more candidates than that take g's own
// exact top-k instead.
struct TopkSample {
  std::uint64_t m = 0, runs = 0;
  bool whole = true;  // the sample is g
};
inline TopkSample topk_sample(std::uint64_t n) {
  constexpr std::uint64_t len = fitting::SidcoTopkBound::kLineLength;
  const std::uint64_t spread = fitting::SidcoTopkBound::sample_lines(n) * len;
  TopkSample t;
  t.whole = n < spread;
  t.m = t.whole ? n : spread;
  t.runs = (t.m + len - 1) / len;
  return t;
}
inline std::uint64_t topk_candidate_room(std::uint64_t n, std::uint64_t k) { return std::min(n, 4 * k + 4096); }

// SIDCo: stage 1 over all x, M - 1 tail stages above the device's eta, the selection above it
// (which the count correction counts), the selection above a corrected threshold where the
// correction moved it, and exact top-k where the decisions chose it. Each stage's reduction, its
// merge and its decision are one launch (reduce_then), the last stage's decision followed by the
// stages' end; the first stage's after the selection's start.
template <class P>
void sidco_resident(P& p, ResidentWorkspace<P>& w, const float* g, std::uint64_t n, const SelectRequest& r,
                    const StartState& start) {
  ResidentState* st = w.state.data();
  std::uint32_t* done = &st->reduce_done;
  const int tails = r.stages > 1 && r.density < fitting::kSidcoFirstStageDensity ? r.stages - 1 : 0;
  if (tails == 0)
    p.reduce_then(g, n, StatsElem{}, MergeStats{}, &st->stats, done,
                  Both{start, Both{SidcoFirst{st}, SidcoStagesDone{st}}});
  else
    p.reduce_then(g, n, StatsElem{}, MergeStats{}, &st->stats, done, Both{start, SidcoFirst{st}});
  for (int i = 1; i <= tails; ++i) {
    if (i == tails)
      p.reduce_then(g, n, StatsAboveAt{st}, MergeStats{}, &st->stats, done, Both{SidcoTail{st}, SidcoStagesDone{st}});
    else
      p.reduce_then(g, n, StatsAboveAt{st}, MergeStats{}, &st->stats, done, SidcoTail{st});
  }
  p.select_then(n, AboveSel{g, n, st}, w.idx.data(), w.val.data(), w.idx.size(), &st->selected, &st->weight,
                w.select.next(), SidcoCounted{st});
  if (r.sidco.correct)
    p.select_then(n, AboveSel{g, n, st, kModeAgain}, w.idx.data(), w.val.data(), w.idx.size(), &st->selected,
                  &st->weight, w.select.next(), SidcoAgain{st});
}

// DGC: a random sample of 1% of |g|, its kk-th largest as the threshold (radix select over the
// sample), the selection above it, and the hierarchical step's exact top-k above 4k/3.
template <class P>
void dgc_resident(P& p, ResidentWorkspace<P>& w, const float* g, std::uint64_t n, const SelectRequest& r,
                  const StartState& start) {
  ResidentState* st = w.state.data();
  count_finite(p, st, g, n, start);
  const std::uint64_t m = dgc_sample_size(n);
  p.for_each(m, RandomSampleBody{g, n, r.seed, w.sample.data()});
  p.reduce_then(w.sample.data(), m, CountElem{kernels::detail::threshold_as_float(-1.0)}, AddU64{}, &st->counted,
                &st->reduce_done, DgcSampleRank{st});
  radix_select(p, st, w.hist.data(), TopkSource{w.sample.data(), m}, kModeSample, DgcThreshold{st});
  p.select_then(n, AboveSel{g, n, st}, w.idx.data(), w.val.data(), w.idx.size(), &st->selected, &st->weight,
                w.select.next(), DgcDecide{st});
}

// sidco-topk: the bound from the sample (SidcoTopkBound's rule: the density's quantile, the runs'
// spread, the needed-th largest, SIDCo-E's stages on the sample), one read for the candidates
// above it that also counts g's finite values, and the exact top-k among them (a radix select over
// the candidates, not over g), or g's own where they fall short of it or overflow the room: one
// exact top-k whose source the device chooses.
template <class P>
void sidco_topk_resident(P& p, ResidentWorkspace<P>& w, const float* g, std::uint64_t n, const SelectRequest& r,
                         const StartState& start) {
  ResidentState* st = w.state.data();
  const TopkSample t = topk_sample(n);
  constexpr std::uint64_t len = fitting::SidcoTopkBound::kLineLength;
  const float* x = g;
  if (!t.whole) {
    p.for_each(t.m, SpreadBody{g, n, fitting::SidcoTopkBound::sample_lines(n), len, w.sample.data()});
    x = w.sample.data();
  }
  p.reduce_then(x, t.m, StatsElem{}, MergeStats{}, &st->stats, &st->reduce_done, Both{start, TopkBoundStart{st}});
  radix_select(p, st, w.hist.data(), TopkSource{x, t.m}, kModeSample, TopkBoundQuantile{st});
  p.for_each(t.runs, RunCount{x, t.m, len, st, w.runs.data()});
  p.reduce_then(w.runs.data(), t.runs, RunSumElem{}, MergeRunSums{}, &st->runs, &st->reduce_done,
                TopkBoundNeeded{st, t.runs});
  radix_select(p, st, w.hist.data(), TopkSource{x, t.m}, kModeSample, TopkBoundValue{st});
  for (int i = 1; i < r.stages; ++i) {
    if (i + 1 == r.stages)
      p.reduce_then(x, t.m, StatsAboveAt{st}, MergeStats{}, &st->stats, &st->reduce_done,
                    Both{SidcoTail{st}, TopkBoundDone{st}});
    else
      p.reduce_then(x, t.m, StatsAboveAt{st}, MergeStats{}, &st->stats, &st->reduce_done, SidcoTail{st});
  }
  if (r.stages == 1) p.for_each(1, TopkBoundDone{st});
  const std::uint64_t room = topk_candidate_room(n, request_k(r, n));  // reserved (the buffer may be larger)
  p.select_then(n, CandidatesSel{g, n, st}, w.cand.data(), static_cast<float*>(nullptr), room, &st->selected,
                &st->weight, w.select.next(), TopkCandidates{st, room});
  p.for_each(room, CandidateValues<std::int32_t>{g, w.cand.data(), st, w.cand_val.data()});
}

inline ResidentState initial_state(std::uint64_t n, const SelectRequest& r) {
  ResidentState s;
  s.n = n;
  s.k = request_k(r, n);
  s.density = r.density;
  s.fallback = r.fallback;
  s.correct = r.sidco.correct;
  s.band = r.sidco.band;
  switch (r.rule) {
    case SelectRequest::Rule::above:
      s.rule = kRuleAbove;
      select_above_at(s, r.threshold);
      s.mode = kModeNone;
      break;
    case SelectRequest::Rule::topk:
      s.rule = kRuleTopk;
      break;
    case SelectRequest::Rule::sidco:
      s.rule = kRuleSidco;
      s.plan = fitting::SidcoStages(n, r.density, r.variant, r.stages, r.sidco.recount).plan();
      s.plan.scale = r.sidco.scale;
      break;
    case SelectRequest::Rule::dgc:
      s.rule = kRuleDgc;
      break;
    case SelectRequest::Rule::top_nonzero:
      s.rule = kRuleTopNonzero;
      s.report.threshold = ::nan("");
      break;
    case SelectRequest::Rule::sidco_topk:
      s.rule = kRuleSidcoTopk;
      s.stages = r.stages;
      break;
  }
  return s;
}

// The selection `r` asks for, into the workspace (reserved for it), its report in the state. The
// last launch of every rule writes the report.
template <class P>
void select_resident(P& p, ResidentWorkspace<P>& w, const float* g, std::uint64_t n, const SelectRequest& r) {
  check_index_range<std::int32_t>(n, "selection");
  if (r.rule == SelectRequest::Rule::above) check_threshold(r.threshold, "above");
  if (r.rule == SelectRequest::Rule::sidco_topk && r.stages < 1)
    throw gs::Error("sidco-topk: the number of SIDCo stages must be at least 1");
  ResidentState* st = w.state.data();
  // The state the selection starts from, set by the first pass's last block (no launch of its own).
  const StartState start{st, initial_state(n, r)};
  const Report report{st, w.idx.size()};
  switch (r.rule) {
    case SelectRequest::Rule::above:
      count_finite(p, st, g, n, start);
      p.select_then(n, AboveSel{g, n, st}, w.idx.data(), w.val.data(), w.idx.size(), &st->selected, &st->weight,
                    w.select.next(), report);
      return;
    case SelectRequest::Rule::topk:
      count_finite(p, st, g, n, start);
      break;
    case SelectRequest::Rule::sidco:
      sidco_resident(p, w, g, n, r, start);
      break;
    case SelectRequest::Rule::dgc:
      dgc_resident(p, w, g, n, r, start);
      break;
    case SelectRequest::Rule::top_nonzero:
      count_finite(p, st, g, n, start);
      p.reduce_then(g, n, CountElem{kernels::detail::threshold_as_float(0.0)}, AddU64{}, &st->counted, &st->reduce_done,
                    TakeNonzero{st});
      break;
    case SelectRequest::Rule::sidco_topk:
      sidco_topk_resident(p, w, g, n, r, start);
      exact_topk(p, st, w.hist.data(), TopkSource{g, n, w.cand_val.data(), w.cand.data()}, w.idx.data(), w.val.data(),
                 w.idx.size(), w.select.next(), report);
      return;
  }
  exact_topk(p, st, w.hist.data(), TopkSource{g, n}, w.idx.data(), w.val.data(), w.idx.size(), w.select.next(), report);
}

// The workspace's selection and report on the host: the device writes the report and up to
// `most` pairs into a pinned block (one launch), the host waits once and reads them (the rest, past `most`,
// with ordinary copies). Counts the bytes that crossed.
template <class P>
SelectionReport fetch_selection(P& p, ResidentWorkspace<P>& w, std::uint64_t most, Selection<std::int32_t>& out) {
  ResidentState* st = w.state.data();
  most = std::min<std::uint64_t>(most, w.idx.size());
  auto block = p.pinned(sizeof(SelectionReport) + most * (sizeof(std::int32_t) + sizeof(float)));
  auto* box = static_cast<SelectionReport*>(block.data());
  auto* idx_out = reinterpret_cast<std::int32_t*>(box + 1);
  auto* val_out = reinterpret_cast<float*>(idx_out + most);
  p.for_each(std::max<std::uint64_t>(most, 1),
             CopySelection<std::int32_t>{&st->report, w.idx.data(), w.val.data(), box, idx_out, val_out, most});
  p.synchronize();
  SelectionReport r;
  std::memcpy(&r, box, sizeof r);
  const std::uint64_t here = std::min(r.count, most);
  out.indices.assign(idx_out, idx_out + here);
  out.values.assign(val_out, val_out + here);
  add_bus_bytes(sizeof r + here * (sizeof(std::int32_t) + sizeof(float)));
  if (r.count > here) {  // beyond twice the target: the rest with copies of their own
    const auto rest_idx = p.download(w.idx.data() + here, r.count - here);
    const auto rest_val = p.download(w.val.data() + here, r.count - here);
    out.indices.insert(out.indices.end(), rest_idx.begin(), rest_idx.end());
    out.values.insert(out.values.end(), rest_val.begin(), rest_val.end());
  }
  return r;
}

}  // namespace gs::kernels::portable
