#pragma once
// The state a selection keeps on the device (resident.hpp) and the GS_HD code that reads and
// writes it there: the element steps and predicates whose parameters the device computed (bind()
// reads them once per thread), and the one-thread decisions between passes: SIDCo's stages and
// count correction (gs/fitting/sidco_plan.hpp), DGC's sampled threshold, the radix select of exact
// top-k, and the report. Every pass of a selection is queued whatever the decisions: a pass whose
// branch was not taken finds its mode off and reads nothing, so no value crosses to the host to
// choose the next launch.
#include <cstdint>

#include "bodies.hpp"
#include "gs/fitting/sidco_plan.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels::portable {

// What the passes of a selection are doing: each pass runs only in its mode.
// kModePicked: an exact top-k made (sidco-topk's, among its candidates, its count in `selected`),
// kept from the passes of g's own.
enum ResidentMode : std::int32_t { kModeNone = 0, kModeAbove, kModeTopk, kModeSample, kModePicked };
enum ResidentRule : std::int32_t { kRuleAbove = 0, kRuleTopk, kRuleSidco, kRuleDgc, kRuleTopNonzero, kRuleSidcoTopk };

// Radix select of the k-th largest key in three digits (11, 10 and 10 bits of the 31-bit key).
inline constexpr int kRadixDigits = 3;
GS_HD inline int radix_shift(int digit) { return digit == 0 ? 20 : (digit == 1 ? 10 : 0); }
GS_HD inline int radix_bins(int digit) { return digit == 0 ? int(kBins) : 1024; }

struct RadixState {
  std::uint32_t prefix = 0;    // the key's bits found so far
  std::uint64_t k = 0;         // the rank still wanted among the keys with that prefix (1: largest)
  std::int64_t last_tie = -1;  // the highest index of the ties at the key that are kept
  std::int32_t found = 0;
};

// Sums over sidco-topk's sample runs of their counts at the density's quantile.
struct RunSums {
  double c = 0.0, cc = 0.0;
};
struct RunSumElem {
  GS_HD void operator()(RunSums& a, float c) const {
    a.c += c;
    a.cc += double(c) * double(c);
  }
};
struct MergeRunSums {
  GS_HD RunSums operator()(const RunSums& a, const RunSums& b) const { return {a.c + b.c, a.cc + b.cc}; }
};

struct ResidentState {
  std::int32_t rule = kRuleAbove;
  std::int32_t mode = kModeNone;
  std::int32_t fallback = 0;  // a failed fit (or an empty SIDCo selection): top-min(k, non-zero)
  std::int32_t correct = 0;   // SIDCo's count correction
  std::int32_t probe_on = 0;  // a count at `probe` is queued next
  std::int32_t stepped = 0;   // SIDCo's correction stepped the threshold up (sidco_corrected_above)
  double band = 1.25;
  double density = 0.0;
  double probe = 0.0;                      // the threshold the next count reads
  double select_at = -1.0;                 // the threshold the selection above reads
  float probe_f = 0.0f, select_f = -1.0f;  // both as the passes compare (threshold_as_float)
  std::uint64_t n = 0, k = 0;              // the vector's size, the target count
  std::uint64_t topk_k = 0;                // the current radix select's k
  std::uint64_t counted = 0;               // the last count pass
  std::uint64_t selected = 0;              // the selection above's full count
  std::uint64_t picked = 0;                // the exact top-k's count
  std::uint64_t ties = 0;                  // ties at the key found
  std::uint64_t finite = 0, nonzero = 0;
  fitting::MagnitudeStats stats;
  fitting::SidcoPlan plan;
  RadixState radix;
  SelectionReport report;
  // sidco-topk: its bound, placed from the sample in steps (1: the runs counted at the density's
  // quantile, 2: the needed-th largest picked, 3: SIDCo-E fitted on the sample), SIDCo's stages
  // there, the sample's finite values, how many the bound leaves above it, and whether the exact
  // top-k runs among the candidates above the bound (else over g)
  std::int32_t bound_step = 0, stages = 1, candidates_on = 0;
  std::uint32_t quantile_key = 0;
  std::uint64_t sample_finite = 0, needed = 0;
  double bound = -1.0;
  RunSums runs;
  // Blocks of the running reduce_then that are done: its last block merges and decides, and sets
  // it back to 0 for the next.
  std::uint32_t reduce_done = 0;
};

// Two decisions, one after the other, by the one thread that runs them.
template <class A, class B>
struct Both {
  A a;
  B b;
  GS_HD void operator()(std::uint64_t j) const {
    a(j);
    b(j);
  }
};
template <class A, class B>
Both(A, B) -> Both<A, B>;

template <class Step>
struct Bound {
  bool on;
  Step step;
};

// ---- passes whose parameters the device holds ------------------------------------------------

struct StatsAboveAt {  // a SIDCo tail stage: y = x - eta over x > eta, while tail stages remain
  const ResidentState* st;
  GS_HD Bound<StatsAboveElem> bind() const {
    const fitting::SidcoPlan& p = st->plan;
    const bool on = p.tails_left > 0 && p.failure == fitting::SidcoFitFailure::none;
    return {on, StatsAboveElem{kernels::detail::threshold_as_float(p.eta), p.eta}};
  }
};
struct StatsProbeAt {  // SIDCo's correction: the count above `probe` and its excess, when queued
  const ResidentState* st;
  GS_HD Bound<StatsAboveElem> bind() const { return {st->probe_on != 0, StatsAboveElem{st->probe_f, st->probe}}; }
};
struct CountAt {  // the count above `probe`, when one is queued
  const ResidentState* st;
  GS_HD Bound<CountElem> bind() const { return {st->probe_on != 0, CountElem{st->probe_f}}; }
};
struct AboveAt {  // the selection above `select_at`
  const float* g;
  const ResidentState* st;
  template <class Index>
  GS_HD bool operator()(Index i) const {
    return st->mode == kModeAbove && selected_above(g[i], st->select_f);
  }
};
struct RadixDigit {  // the digit of x[i] when its higher digits are the prefix found, else -1
  const float* x;
  const ResidentState* st;
  int digit;
  std::int32_t mode;
  GS_HD int operator()(std::uint64_t i) const {
    if (st->mode != mode) return -1;
    const std::uint32_t key = magnitude_key(x[i]);
    const int shift = radix_shift(digit);
    if (digit > 0 && (key >> (shift + 10)) != (st->radix.prefix >> (shift + 10))) return -1;  // 10-bit digits
    return int((key >> shift) & std::uint32_t(radix_bins(digit) - 1));
  }
};
struct TieAt {  // the elements whose key is the one found
  const float* g;
  const ResidentState* st;
  template <class Index>
  GS_HD bool operator()(Index i) const {
    return st->mode == kModeTopk && magnitude_key(g[i]) == st->radix.prefix;
  }
};
struct TopkAt {  // exact top-k: keys above the one found, and its ties up to the last one kept
  const float* g;
  const ResidentState* st;
  template <class Index>
  GS_HD bool operator()(Index i) const {
    if (st->mode != kModeTopk) return false;
    const std::uint32_t k = magnitude_key(g[i]), key = st->radix.prefix;
    return (k > key && k < kNonfiniteKey) || (k == key && std::int64_t(i) <= st->radix.last_tie);
  }
};

// ---- one-thread decisions ----------------------------------------------------------------------

GS_HD inline void select_above_at(ResidentState& s, double t) {
  s.mode = kModeAbove;
  s.select_at = t;
  s.select_f = kernels::detail::threshold_as_float(t);
}
GS_HD inline void probe_at(ResidentState& s, double t) {
  s.probe_on = 1;
  s.probe = t;
  s.probe_f = kernels::detail::threshold_as_float(t);
}
GS_HD inline std::uint64_t min_u64(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }
// Exact top-k of `k` values (none for 0).
GS_HD inline void pick_topk(ResidentState& s, std::uint64_t k) {
  s.topk_k = k;
  s.mode = k > 0 ? kModeTopk : kModeNone;
}
// What a compressor sends when the rule could not place a threshold: the min(k, non-zero)
// largest (the same set as every non-zero value when they are fewer than k).
GS_HD inline void fall_back(ResidentState& s) { pick_topk(s, min_u64(s.k, s.nonzero)); }

struct SetState {
  ResidentState* st;
  ResidentState init;
  GS_HD void operator()(std::uint64_t) const { *st = init; }
};
// SetState as the first decision of a selection, in the last block of its first reduction (whose
// element step reads no state): the state the selection starts from, keeping what that reduction
// just wrote (`counted` or `stats`); its count of blocks done is 0 in both.
struct StartState {
  ResidentState* st;
  ResidentState init;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState s = init;
    s.counted = st->counted;
    s.stats = st->stats;
    *st = s;
  }
};
struct NoStep {
  GS_HD void operator()(std::uint64_t) const {}
};
struct TakeFinite {  // after a count of every finite x into `counted`
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    st->finite = st->counted;
    st->report.nonfinite = st->n - st->counted;
    if (st->rule == kRuleTopk) {
      st->report.exact = 1;
      pick_topk(*st, min_u64(st->k, st->finite));
    }
    if (st->rule == kRuleAbove) st->mode = kModeAbove;
  }
};
struct TakeNonzero {  // after a count of the finite non-zero x into `counted`
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    st->nonzero = st->counted;
    fall_back(*st);
  }
};
struct SidcoFirst {  // after the statistics of all x into `stats`
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    st->nonzero = st->stats.count;
    st->finite = st->stats.count + st->stats.zeros;
    st->report.nonfinite = st->stats.nonfinite;
    fitting::sidco_first(st->plan, st->stats);
  }
};
struct SidcoTail {  // after the statistics above eta into `stats`
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    if (st->plan.tails_left > 0 && st->plan.failure == fitting::SidcoFitFailure::none)
      fitting::sidco_tail(st->plan, st->stats);
  }
};
// After the stages: the threshold stands, or (count correction) a count at it is queued.
struct SidcoStagesDone {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    s.report.stages = s.plan.run;
    s.report.threshold = s.plan.eta;
    s.report.estimate = s.plan.eta;
    if (s.plan.failure != fitting::SidcoFitFailure::none) {
      s.report.estimate = ::nan("");
      s.report.threshold = ::nan("");
      if (s.fallback)
        fall_back(s);
      else
        s.report.failure = SelectionFailure::fit;
    } else if (s.correct) {
      probe_at(s, s.plan.eta);
    } else {
      select_above_at(s, s.plan.eta);
    }
  }
};
// The count correction (SidcoRule), from the count above eta and its mean excess (StatsProbeAt):
// inside the band the selection stands; above it the selection at the threshold stepped up on that
// excess (sidco_corrected_above), or g's exact top-k where no step is possible; below it the
// selection at the corrected threshold.
struct SidcoCorrect {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (!s.probe_on) return;
    s.probe_on = 0;
    const std::uint64_t c = s.stats.count + s.stats.zeros;
    s.report.estimate_count = c;
    if (!fitting::sidco_needs_correction(s.plan, c, s.band)) {
      select_above_at(s, s.plan.eta);
      return;
    }
    s.report.corrected = 1;
    double t = s.plan.eta;
    if (c > s.k) {
      t = fitting::sidco_corrected_above(s.plan, s.plan.eta, c, s.stats.sum_signed / double(c), s.band);
      if (!(t > s.plan.eta)) {
        s.report.exact = 1;
        pick_topk(s, min_u64(s.k, s.finite));
        return;
      }
      s.stepped = 1;
    } else {
      t = fitting::sidco_corrected_below(s.plan, s.plan.eta, c, s.band);
    }
    s.report.threshold = t;
    select_above_at(s, t);
  }
};
// After the selection above: a corrected one still outside the band becomes exact top-k when it
// lies above it or came from the step up (the CPU keeps the held selection's k largest then); an
// empty one, with a fallback, the min(k, non-zero) largest.
struct SidcoSelected {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAbove) return;
    const std::uint64_t m = s.selected;
    if (!s.correct) s.report.estimate_count = m;  // no correction: the estimate's own selection
    if (s.report.corrected && (m > s.k || s.stepped) && fitting::sidco_needs_correction(s.plan, m, s.band)) {
      s.report.exact = 1;
      pick_topk(s, min_u64(s.k, s.finite));
    } else if (s.fallback && m == 0) {
      fall_back(s);
    }
  }
};
// DGC: after a count of the sample's finite values, the rank of its threshold in the sample.
struct DgcSampleRank {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    const std::uint64_t f = s.counted;
    if (f == 0) {
      s.report.threshold = ::nan("");
      if (s.fallback)
        fall_back(s);
      else
        s.report.failure = SelectionFailure::sample;
      return;
    }
    pick_topk(s, fitting::formula::dgc_sample_rank(f, s.density));
    s.mode = kModeSample;
  }
};
// DGC: the sample's kk-th largest is the threshold; a count above it is queued.
struct DgcThreshold {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeSample) return;
    s.mode = kModeNone;
    const double t = double(kernels::detail::key_to_float(s.radix.prefix));
    s.report.threshold = t;
    s.report.stages = 1;
    // The sampled value is kept, as the host's rule keeps it (at or above: selection_bound).
    probe_at(s, fitting::formula::selection_bound(t));
  }
};
// DGC: more than 4k/3 above the threshold takes the hierarchical step (exact top-k).
struct DgcDecide {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (!s.probe_on) return;
    s.probe_on = 0;
    if (fitting::formula::dgc_exact_step(s.counted, s.k)) {
      s.report.stages = 2;
      s.report.exact = 1;
      pick_topk(s, min_u64(s.k, s.finite));
    } else {
      select_above_at(s, s.probe);  // the bound DgcThreshold counted at
    }
  }
};

// Radix select: the start, then per digit the bin holding the k-th key (from its histogram).
struct RadixBegin {
  ResidentState* st;
  std::int32_t mode;
  GS_HD void operator()(std::uint64_t) const {
    if (st->mode != mode) return;
    st->radix = RadixState{};
    st->radix.k = st->topk_k;
  }
};
struct RadixStep {
  const unsigned long long* hist;
  ResidentState* st;
  int digit;
  std::int32_t mode;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != mode) return;
    RadixState& r = s.radix;
    const int top = digit == 0 ? int(kFiniteBins) : radix_bins(digit);
    std::uint64_t cum = 0;
    for (int b = top; b-- > 0;) {
      if (cum + hist[b] >= r.k) {
        r.prefix |= std::uint32_t(b) << radix_shift(digit);
        r.k -= cum;
        if (digit == kRadixDigits - 1) {
          r.found = 1;
          s.ties = hist[b];
        }
        return;
      }
      cum += hist[b];
    }
    s.report.failure = SelectionFailure::k_exceeds_finite;  // fewer finite keys than k
    s.mode = kModeNone;
  }
};
// A digit's step from the histogram a gated pass left (gated_histogram_then), the first digit's
// after the select's start.
struct RadixStepFrom {
  ResidentState* st;
  int digit;
  std::int32_t mode;
  GS_HD void operator()(const unsigned long long* hist) const {
    if (digit == 0) RadixBegin{st, mode}(0);
    RadixStep{hist, st, digit, mode}(0);
  }
};
// The last tie kept: the r.k-th lowest index among the ties (ties[] ascending).
template <class Index>
struct LastTie {
  const Index* ties;
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    if (st->mode == kModeTopk) st->radix.last_tie = std::int64_t(ties[st->radix.k - 1]);
  }
};

// ---- sidco-topk (gs::fitting::SidcoTopkBound's rule, decided on the device) ---------------------

// After the statistics of the sample into `stats`: its finite values, and the density's quantile
// picked next (the sample's floor(m density)-th largest), or no bound (every finite x a candidate).
struct TopkBoundStart {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    s.sample_finite = s.stats.count + s.stats.zeros;
    const double m = double(s.sample_finite), expected = m * s.density;
    if (s.k >= s.n || expected < 1.0 || expected >= m) return;
    pick_topk(s, std::uint64_t(expected));
    s.mode = kModeSample;
    s.bound_step = 1;
  }
};
struct TopkBoundQuantile {  // the quantile found: the runs are counted at it
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    if (st->bound_step != 1 || st->mode != kModeSample) return;
    st->mode = kModeNone;
    st->quantile_key = st->radix.prefix;
  }
};
struct RunCount {  // run j of the sample (len values of x, m in all): its finite values at or above the quantile
  const float* x;
  std::uint64_t m, len;
  const ResidentState* st;
  float* out;
  GS_HD void operator()(std::uint64_t j) const {
    int c = 0;
    if (st->bound_step == 1) {
      const std::uint64_t end = (j + 1) * len < m ? (j + 1) * len : m;
      for (std::uint64_t i = j * len; i < end; ++i) {
        const std::uint32_t key = magnitude_key(x[i]);
        c += key >= st->quantile_key && key < kernels::detail::kNonfiniteKey ? 1 : 0;
      }
    }
    out[j] = float(c);
  }
};
// After the runs' sums: the values the bound must leave above it, the one of that rank picked next.
struct TopkBoundNeeded {
  ResidentState* st;
  std::uint64_t runs;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.bound_step != 1) return;
    const double expected = double(s.sample_finite) * s.density;
    s.needed = fitting::formula::sidco_topk_needed(expected, s.density, runs, s.runs.c, s.runs.cc);
    s.bound_step = 0;
    if (s.needed >= s.sample_finite) return;
    pick_topk(s, s.needed);
    s.mode = kModeSample;
    s.bound_step = 2;
  }
};
// The needed-th largest found: the bound just below it (its ties kept); SIDCo-E's stage 1 on the
// sample at the density that leaves `needed` above, from the sample's statistics still in `stats`.
struct TopkBoundValue {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.bound_step != 2 || s.mode != kModeSample) return;
    s.mode = kModeNone;
    s.bound = double(::nextafterf(kernels::detail::key_to_float(s.radix.prefix), 0.0f));
    s.plan = fitting::sidco_plan(s.sample_finite, double(s.needed) / double(s.sample_finite),
                                 fitting::SidcoVariant::exponential, s.stages, false);
    fitting::sidco_first(s.plan, s.stats);
    s.bound_step = 3;
  }
};
// After SIDCo's tail stages: its threshold lowers the bound where it lies below (a fit that failed
// leaves the sample's value); then the candidates are the finite x above the bound (all of them
// without one).
struct TopkBoundDone {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.bound_step == 3 && s.plan.failure == fitting::SidcoFitFailure::none) {
      if (s.plan.eta < s.bound) s.bound = s.plan.eta;
      s.report.stages = s.plan.run;
    }
    s.bound_step = 0;
    if (!(s.bound > 0.0)) s.bound = -1.0;
    s.report.exact = 1;
    select_above_at(s, s.bound);
  }
};
// The candidates counted: when they hold the min(k, finite) largest and fit their room, the exact
// top-k runs among them; otherwise over g (TopkOfG), which holds them by definition.
struct TopkCandidates {
  ResidentState* st;
  std::uint64_t room;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAbove) return;
    s.mode = kModeNone;
    const std::uint64_t want = min_u64(s.k, s.finite);
    if (s.selected >= want && s.selected <= room) {
      s.candidates_on = 1;
      pick_topk(s, want);
    }
  }
};
// The candidates' values, zeros past their count: the radix select reads the whole room, and a
// zero never outranks a candidate (at a tie, the lower position, a candidate's, is kept).
template <class Index>
struct CandidateValues {
  const float* g;
  const Index* cand;
  const ResidentState* st;
  float* out;
  GS_HD void operator()(std::uint64_t j) const {
    if (!st->candidates_on || st->mode != kModeTopk) return;
    out[j] = j < st->selected ? g[cand[j]] : 0.0f;
  }
};
template <class Index>
struct CandidateIndices {  // the exact top-k's positions among the candidates, as g's indices
  Index* idx;
  const Index* cand;
  const ResidentState* st;
  GS_HD void operator()(std::uint64_t j) const {
    if (st->candidates_on && st->mode == kModeTopk) idx[j] = cand[idx[j]];
  }
};
// The candidates' top-k kept from g's passes (its count in `selected`: those passes write
// `picked` whether they run or not), or g's own exact top-k next.
struct TopkOfG {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (!s.candidates_on) {
      s.report.corrected = 1;  // the bound did not hold, or its candidates overflowed their room
      pick_topk(s, min_u64(s.k, s.finite));
    } else if (s.mode == kModeTopk) {
      s.mode = kModePicked;
      s.selected = s.picked;
    }
  }
};

// The report: the selection's count (capped at the buffers' capacity) and the exact top-k's
// threshold (SIDCo's just below its k-th |g|, as the host's selection puts it).
struct Report {
  ResidentState* st;
  std::uint64_t capacity;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    const bool topk = s.mode == kModeTopk || s.mode == kModePicked;
    const std::uint64_t full =
        s.mode == kModeTopk ? s.picked : (s.mode == kModeAbove || s.mode == kModePicked ? s.selected : 0);
    s.report.count = min_u64(full, capacity);
    if (topk && s.report.exact) {
      const double kth = double(kernels::detail::key_to_float(s.radix.prefix));
      s.report.threshold = s.rule == kRuleSidco ? ::nextafter(kth, 0.0) : kth;
    }
  }
};

// Copies to host memory the device may write into (a pinned, mapped block).
template <class T>
struct CopyOne {
  const T* src;
  T* dst;
  GS_HD void operator()(std::uint64_t) const { *dst = *src; }
};
template <class Index>
struct CopyPairs {
  const Index* idx;
  const float* val;
  Index* idx_out;
  float* val_out;
  GS_HD void operator()(std::uint64_t j) const {
    idx_out[j] = idx[j];
    val_out[j] = val[j];
  }
};

}  // namespace gs::kernels::portable
