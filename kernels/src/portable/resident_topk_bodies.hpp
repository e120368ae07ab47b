#pragma once
// sidco-topk's bound placed on the device (gs::fitting::SidcoTopkBound's rule): the one-thread
// decisions and element steps of its resident selection (resident.hpp), over the state of
// resident_bodies.hpp.
#include <cstdint>

#include "resident_bodies.hpp"

namespace gs::kernels::portable {

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
// The candidates counted, with g's finite values (CandidatesSel's weights): when they hold the
// min(k, finite) largest and fit their room, the exact top-k runs among them; otherwise over g,
// which holds them by definition.
struct TopkCandidates {
  ResidentState* st;
  std::uint64_t room;
  GS_HD void operator()(std::uint64_t) const {
    ResidentState& s = *st;
    if (s.mode != kModeAbove) return;
    s.mode = kModeNone;
    s.finite = std::uint64_t(s.weight);
    s.report.nonfinite = s.n - s.finite;
    const std::uint64_t want = min_u64(s.k, s.finite);
    if (s.selected >= want && s.selected <= room)
      s.candidates_on = 1;
    else
      s.report.corrected = 1;  // the bound did not hold, or its candidates overflowed their room
    pick_topk(s, want);
  }
};
// The candidates' values, for the radix select among them.
template <class Index>
struct CandidateValues {
  const float* g;
  const Index* cand;
  const ResidentState* st;
  float* out;
  GS_HD void operator()(std::uint64_t j) const {
    if (st->candidates_on && st->mode == kModeTopk && j < st->selected) out[j] = g[cand[j]];
  }
};

}  // namespace gs::kernels::portable
