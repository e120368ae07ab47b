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
// kModeAgain: SIDCo's count correction moved the threshold: the selection above it is made again.
enum ResidentMode : std::int32_t { kModeNone = 0, kModeAbove, kModeTopk, kModeSample, kModeAgain };
enum ResidentRule : std::int32_t { kRuleAbove = 0, kRuleTopk, kRuleSidco, kRuleDgc, kRuleTopNonzero, kRuleSidcoTopk };

// Radix select of the k-th largest key in three digits (11, 10 and 10 bits of the 31-bit key).
inline constexpr int kRadixDigits = 3;
GS_HD inline int radix_shift(int digit) { return digit == 0 ? 20 : (digit == 1 ? 10 : 0); }
GS_HD inline int radix_bins(int digit) { return digit == 0 ? int(kBins) : 1024; }

struct RadixState {
  std::uint32_t prefix = 0;  // the key's bits found so far
  std::uint64_t k = 0;       // the rank still wanted among the keys with that prefix (1: largest)
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
  std::int32_t stepped = 0;   // SIDCo's correction stepped the threshold up (sidco_corrected_above)
  double band = 1.25;
  double density = 0.0;
  double select_at = -1.0;     // the threshold the selection above reads
  float select_f = -1.0f;      // as the passes compare it (threshold_as_float)
  std::uint64_t n = 0, k = 0;  // the vector's size, the target count
  std::uint64_t topk_k = 0;    // the current radix select's k
  std::uint64_t counted = 0;   // the last count pass
  std::uint64_t selected = 0;  // the selection above's full count
  std::uint64_t picked = 0;    // the exact top-k's count
  std::uint64_t finite = 0, nonzero = 0;
  double weight = 0.0;  // the last selection's sum of its weights (SIDCo: the excess over its threshold)
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
GS_HD inline std::uint64_t min_u64(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }

// The vector a radix select and its selection read: x (len values), or, for sidco-topk where the
// state says its candidates hold the top-k, their values (cand_val, as many as it selected, at most
// their room), the indices written then being the candidates' own (cand).
struct TopkSource {
  const float* x;
  std::uint64_t len;
  const float* cand_val = nullptr;  // null: x only
  const std::int32_t* cand = nullptr;
  GS_HD bool candidates(const ResidentState& s) const { return cand_val != nullptr && s.candidates_on != 0; }
  GS_HD const float* data(const ResidentState& s) const { return candidates(s) ? cand_val : x; }
  GS_HD std::uint64_t size(const ResidentState& s) const { return candidates(s) ? s.selected : len; }
};
struct RadixDigit {  // the digit of x[i] when its higher digits are the prefix found, else -1
  TopkSource src;
  const ResidentState* st;
  int digit;
  std::int32_t mode;
  GS_HD int operator()(std::uint64_t i) const {
    if (st->mode != mode || i >= src.size(*st)) return -1;
    const std::uint32_t key = magnitude_key(src.data(*st)[i]);
    const int shift = radix_shift(digit);
    if (digit > 0 && (key >> (shift + 10)) != (st->radix.prefix >> (shift + 10))) return -1;  // 10-bit digits
    return int((key >> shift) & std::uint32_t(radix_bins(digit) - 1));
  }
  // The elements the pass reads where its gate is open: its loop's end, and the cuda-host twin's
  // count.
  GS_HD std::uint64_t extent() const { return src.size(*st); }
};

// ---- one-launch selections (select_then) ------------------------------------------------------
// A selection's bind() reads its parameters from the state once per thread: whether it runs (on),
// how many elements it reads (len), and per element whether it is taken (kTake) or a tie (kTie,
// taken while fewer than tie_limit() ties came before it), the index and value written for a
// taken one, and a weight summed over every element read.

// The finite x above the state's threshold (select_f) while the state is in `mode`; their weights
// are the excess over the threshold (SIDCo's count correction reads its mean).
struct AboveSel {
  const float* g;
  std::uint64_t n;
  const ResidentState* st;
  std::int32_t mode = kModeAbove;
  struct Bound {
    bool on;
    std::uint64_t len;
    const float* g;
    float t;
    double shift;
    GS_HD unsigned flags(std::uint64_t i) const { return selected_above(g[i], t) ? kTake : 0u; }
    GS_HD std::uint64_t tie_limit() const { return 0; }
    GS_HD std::int64_t index(std::uint64_t i) const { return std::int64_t(i); }
    GS_HD float value(std::uint64_t i) const { return g[i]; }
    GS_HD double weight(std::uint64_t i) const { return flags(i) ? double(::fabsf(g[i])) - shift : 0.0; }
  };
  GS_HD Bound bind() const { return {st->mode == mode, n, g, st->select_f, st->select_at}; }
};
// The finite x above the state's threshold, weighing 1 each finite x it reads: sidco-topk's
// candidates, counted with the finite values of g in the same read.
struct CandidatesSel {
  const float* g;
  std::uint64_t n;
  const ResidentState* st;
  struct Bound : AboveSel::Bound {
    GS_HD double weight(std::uint64_t i) const { return magnitude_key(g[i]) < kNonfiniteKey ? 1.0 : 0.0; }
  };
  GS_HD Bound bind() const { return {{st->mode == kModeAbove, n, g, st->select_f, 0.0}}; }
};
// Exact top-k: the keys above the one the radix select found, and its ties, the lowest indices
// first, up to the rank still wanted at it (radix.k).
struct TopkSel {
  TopkSource src;
  const ResidentState* st;
  struct Bound {
    bool on;
    std::uint64_t len;
    const float* x;
    const std::int32_t* map;  // null: the index itself
    std::uint32_t key;
    std::uint64_t ties;
    GS_HD unsigned flags(std::uint64_t i) const {
      const std::uint32_t k = magnitude_key(x[i]);
      return k == key ? kTie : (k > key && k < kNonfiniteKey ? kTake : 0u);
    }
    GS_HD std::uint64_t tie_limit() const { return ties; }
    GS_HD std::int64_t index(std::uint64_t i) const { return map ? std::int64_t(map[i]) : std::int64_t(i); }
    GS_HD float value(std::uint64_t i) const { return x[i]; }
    GS_HD double weight(std::uint64_t) const { return 0.0; }
  };
  GS_HD Bound bind() const {
    const ResidentState& s = *st;
    return {s.mode == kModeTopk, src.size(s), src.data(s), src.candidates(s) ? src.cand : nullptr,
            s.radix.prefix,      s.radix.k};
  }
};

// ---- one-thread decisions ----------------------------------------------------------------------

GS_HD inline void select_above_at(ResidentState& s, double t) {
  s.mode = kModeAbove;
  s.select_at = t;
  s.select_f = kernels::detail::threshold_as_float(t);
}
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
// After the stages: the selection above the threshold (which is also the count correction's count).
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
    } else {
      select_above_at(s, s.plan.eta);
    }
  }
};
// The count correction (SidcoRule), from the selection above eta, its count and its excess
// (AboveSel's weights): inside the band the selection stands; above it the selection is made again
// at the threshold stepped up on that excess (sidco_corrected_above), or g's exact top-k is taken
// where no step is possible; below it, made again at the corrected threshold. Without a
// correction, an empty selection with a fallback takes the min(k, non-zero) largest.
struct SidcoCounted {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAbove) return;
    const std::uint64_t m = s.selected;
    s.report.estimate_count = m;
    if (!s.correct || !fitting::sidco_needs_correction(s.plan, m, s.band)) {
      if (s.fallback && m == 0) fall_back(s);
      return;
    }
    s.report.corrected = 1;
    double t = s.plan.eta;
    if (m > s.k) {
      t = fitting::sidco_corrected_above(s.plan, s.plan.eta, m, s.weight / double(m), s.band);
      if (!(t > s.plan.eta)) {
        s.report.exact = 1;
        pick_topk(s, min_u64(s.k, s.finite));
        return;
      }
      s.stepped = 1;
    } else {
      t = fitting::sidco_corrected_below(s.plan, s.plan.eta, m, s.band);
    }
    s.report.threshold = t;
    select_above_at(s, t);
    s.mode = kModeAgain;
  }
};
// After the selection at a corrected threshold: one still outside the band becomes exact top-k
// when it lies above it or came from the step up (the CPU keeps the held selection's k largest
// then); an empty one, with a fallback, the min(k, non-zero) largest.
struct SidcoAgain {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAgain) return;
    s.mode = kModeAbove;
    s.report.corrected = 2;
    const std::uint64_t m = s.selected;
    if ((m > s.k || s.stepped) && fitting::sidco_needs_correction(s.plan, m, s.band)) {
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
// DGC: the sample's kk-th largest is the threshold; the selection above it follows.
struct DgcThreshold {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeSample) return;
    const double t = double(kernels::detail::key_to_float(s.radix.prefix));
    s.report.threshold = t;
    s.report.stages = 1;
    // The sampled value is kept, as the host's rule keeps it (at or above: selection_bound).
    select_above_at(s, fitting::formula::selection_bound(t));
  }
};
// DGC: more than 4k/3 selected above the threshold takes the hierarchical step (exact top-k).
struct DgcDecide {
  ResidentState* st;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAbove || !fitting::formula::dgc_exact_step(s.selected, s.k)) return;
    s.report.stages = 2;
    s.report.exact = 1;
    pick_topk(s, min_u64(s.k, s.finite));
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
        if (digit == kRadixDigits - 1) r.found = 1;
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
// A digit's step from its histogram, then a one-thread decision (the last digit's).
template <class Last>
struct RadixStepThen {
  RadixStepFrom step;
  Last last;
  GS_HD void operator()(const unsigned long long* hist) const {
    step(hist);
    last(std::uint64_t{0});
  }
};

// The report: the selection's count (capped at the buffers' capacity) and the exact top-k's
// threshold (SIDCo's just below its k-th |g|, as the host's selection puts it).
struct Report {
  ResidentState* st;
  std::uint64_t capacity;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    const bool topk = s.mode == kModeTopk;
    const std::uint64_t full = topk ? s.picked : (s.mode == kModeAbove ? s.selected : 0);
    s.report.count = min_u64(full, capacity);
    if (topk && s.report.exact) {
      const double kth = double(kernels::detail::key_to_float(s.radix.prefix));
      s.report.threshold = s.rule == kRuleSidco ? ::nextafter(kth, 0.0) : kth;
    }
  }
};

// The report and the first min(count, most) pairs copied to host memory the device may write into
// (a pinned, mapped block): one launch over `most` slots, the report by the first thread.
template <class Index>
struct CopySelection {
  const SelectionReport* report;
  const Index* idx;
  const float* val;
  SelectionReport* report_out;
  Index* idx_out;
  float* val_out;
  std::uint64_t most;
  GS_HD void operator()(std::uint64_t j) const {
    if (j == 0) *report_out = *report;
    if (j < most && j < report->count) {
      idx_out[j] = idx[j];
      val_out[j] = val[j];
    }
  }
};

}  // namespace gs::kernels::portable

#include "resident_topk_bodies.hpp"  // sidco-topk's decisions, over the state above
