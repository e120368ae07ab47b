// CPU backend: SIDCo threshold plus compaction as one pipeline (see cpu.hpp, sidco_select). The
// stage logic is fitting's SidcoStages; this file only decides which bytes each stage reads.
// sidco-topk, which reads through the same workspace, is sidco_topk.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "compact.hpp"
#include "parallel.hpp"
#include "sidco_workspace.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::cpu {

SidcoWorkspace::SidcoWorkspace() : impl_(std::make_unique<Impl>()) {}
SidcoWorkspace::~SidcoWorkspace() = default;
SidcoWorkspace::SidcoWorkspace(SidcoWorkspace&&) noexcept = default;
SidcoWorkspace& SidcoWorkspace::operator=(SidcoWorkspace&&) noexcept = default;
std::size_t SidcoWorkspace::bytes() const {
  std::size_t b = 0;
  for (const auto& p : impl_->parts) b += p.cap * (sizeof(std::int32_t) + sizeof(float));
  return b + impl_->sample.capacity() * sizeof(float);
}
SidcoWorkspace::Impl& workspace_impl(SidcoWorkspace& w) { return *w.impl_; }

namespace detail {

using kernels::detail::threshold_as_float;

fitting::MagnitudeStats merge_in_order(const std::vector<fitting::MagnitudeStats>& parts) {
  fitting::MagnitudeStats r;
  for (const auto& p : parts) r = gs::fitting::merge(r, p);
  return r;
}

// One read of g: the candidates x > t into the workspace, and the statistics of y = x - shift
// over them (taken right after each chunk is packed, while it is in cache).
// With pack_above > threshold the statistics (of x > threshold) are taken from g's chunk and only
// the x > pack_above are packed (the predicted route). whole: the statistics are those of every
// x (stage 1's; threshold and shift unused) and the x > pack_above are packed (the sampled route).
fitting::MagnitudeStats collect_candidates(std::span<const float> g, double threshold, double shift,
                                           fitting::StatsFields f, SidcoWorkspace::Impl& w, double pack_above,
                                           bool whole, int max_threads) {
  const bool same = !whole && !(pack_above > threshold);
  const float t = threshold_as_float(same ? threshold : pack_above);
  const std::size_t chunks = detail::chunk_count(g.size());
  w.parts.resize(static_cast<std::size_t>(detail::range_threads(chunks, max_threads)));
  w.seg_begin.assign(chunks, 0);
  w.seg_len.assign(chunks, 0);
  w.chunk_stats.assign(chunks, fitting::MagnitudeStats{});
  detail::for_thread_ranges(
      g.size(),
      [&](int r, std::size_t begin, std::size_t end) {
        auto& p = w.parts[static_cast<std::size_t>(r)];
        p.size = 0;
        // Branchless packing once the previous chunk packed more than 1% of its elements (about 8% of
        // the 8-lane groups hit: the branch then mispredicts often; docs/BENCHMARKS.md, "SIDCo-E's
        // routes").
        bool dense_hits = false;
        for (std::size_t c = begin; c < end; c += kChunk) {
          const std::size_t ce = std::min(end, c + kChunk);
          p.ensure(p.size + (ce - c));  // room for a whole chunk: the packed stores need it
          const std::size_t before = p.size;
          const std::size_t ci = c / kChunk;
          // Statistics over more than is packed: both in one loop over the chunk.
          if (!same) {
            w.chunk_stats[ci] =
                whole ? detail::stats_and_compact(g.data(), c, ce, f, t, p.idx.get(), p.val.get(), p.size, dense_hits)
                      : detail::stats_above_and_compact(g.data(), c, ce, threshold, shift, f, t, p.idx.get(),
                                                        p.val.get(), p.size, dense_hits);
            dense_hits = 100 * (p.size - before) > ce - c;
          } else
            p.size = detail::compact_range(g.data(), static_cast<const std::int32_t*>(nullptr), c, ce, t, p.idx.get(),
                                           p.val.get(), p.size);
          w.seg_begin[ci] = before;
          w.seg_len[ci] = p.size - before;
          if (same)
            w.chunk_stats[ci] = detail::stats_above_block(p.val.get() + before, p.size - before, threshold, shift, f);
        }
      },
      max_threads);
  return merge_in_order(w.chunk_stats);
}

// One read of the candidates: keep those above t (in place) and, with stats, take the
// statistics of y = x - shift over the kept.
std::uint64_t workspace_total(const SidcoWorkspace::Impl& w) {
  std::uint64_t n = 0;
  for (const auto& p : w.parts) n += p.size;
  return n;
}

void check_int32(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) + 1)
    throw gs::Error("sidco_select: " + std::to_string(n) +
                    " elements cannot be addressed by int32 indices; split the vector");
}

}  // namespace detail

namespace {

using detail::check_int32;
using detail::collect_candidates;
using detail::merge_in_order;
using detail::workspace_total;
using kernels::detail::selected_above;
using kernels::detail::threshold_as_float;

fitting::MagnitudeStats narrow_candidates(double threshold, double shift, fitting::StatsFields f, bool with_stats,
                                          SidcoWorkspace::Impl& w) {
  const float t = threshold_as_float(threshold);
  const std::size_t chunks = w.seg_len.size();
  const int nt = static_cast<int>(w.parts.size());
#pragma omp parallel for schedule(static, 1) num_threads(nt)
  for (int r = 0; r < nt; ++r) {
    auto& p = w.parts[static_cast<std::size_t>(r)];
    std::size_t out = 0;
    const std::size_t c0 = detail::thread_first_chunk(chunks, r, nt);
    const std::size_t c1 = detail::thread_first_chunk(chunks, r + 1, nt);
    for (std::size_t ci = c0; ci < c1; ++ci) {
      const std::size_t b = w.seg_begin[ci], before = out;
      out = detail::compact_range(p.val.get(), p.idx.get(), b, b + w.seg_len[ci], t, p.idx.get(), p.val.get(), out);
      w.seg_begin[ci] = before;
      w.seg_len[ci] = out - before;
      if (with_stats)
        w.chunk_stats[ci] = detail::stats_above_block(p.val.get() + before, out - before, threshold, shift, f);
    }
    p.size = out;
  }
  return with_stats ? merge_in_order(w.chunk_stats) : fitting::MagnitudeStats{};
}

// The selection from candidates that hold every x > floor, when eta is at or above floor: the
// candidates narrowed to x > eta in place. Returns whether they hold the selection.
bool select_from_candidates(double eta, double floor, SidcoWorkspace::Impl& w) {
  if (!(eta >= floor)) return false;
  if (eta != floor) narrow_candidates(eta, 0.0, {}, false, w);
  return true;
}

// The sampled route's sample: kSampleLines cache lines of 16 floats spread evenly over g (about
// 4096 scattered reads, 1/16 of g at most), with the statistics stage 1 takes.
constexpr std::size_t kSampleLine = 16, kSampleLines = 4096;
constexpr std::size_t kSampleSize = kSampleLine * kSampleLines;
constexpr std::size_t kSampledMinN = 16 * kSampleSize;
fitting::MagnitudeStats sample_stats(std::span<const float> g, fitting::StatsFields f, SidcoWorkspace::Impl& w) {
  spread_sample(g, kSampleLines, kSampleLine, w.sample);
  return cpu::stats(w.sample, f);
}

struct Pipeline {
  SidcoSelectResult result;
  bool in_workspace = false;                 // selection is in the workspace parts (candidates route)
  std::optional<fitting::SidcoStages> plan;  // for the count correction
};

// A bound for the candidates of the automatic route (the share of g they may take).
constexpr double kAutomaticMaxCandidates = 0.10;

// One stage (SIDCo-E): the predicted route predicts stage 1 itself, from a sample, and packs the
// x above that prediction's threshold at kSampleMargin times the density in the same read that
// takes stage 1's statistics; when stage 1's threshold comes out at or above it (unless the
// sample's mean overstates g's by more than the margin allows), the selection comes from those
// candidates, else from one more read of g. The constexpr numbers and how far a sample's mean
// strays: docs/BENCHMARKS.md, "SIDCo-E's routes". Returns the
// prediction's threshold, or -1 (0 when the sample holds nothing to fit) when the route is not
// taken.
double predicted_first_bound(std::span<const float> g, double density, fitting::SidcoVariant variant, SidcoRoute route,
                             const fitting::SidcoStages& plan, SidcoWorkspace::Impl& w) {
  constexpr double kSampleMargin = 3.0;
  if (!(variant == fitting::SidcoVariant::exponential && plan.single_stage() && g.size() >= kSampledMinN &&
        kSampleMargin * density < 1.0 &&
        (route == SidcoRoute::predicted ||
         (route == SidcoRoute::automatic && kSampleMargin * density <= kAutomaticMaxCandidates))))
    return -1.0;
  fitting::SidcoStages probe(kSampleSize, kSampleMargin * density, variant, 1, false);
  probe.first(sample_stats(g, plan.first_fields(), w));
  return probe.threshold();
}

// After stage 1, with stages to come: the bound the tail stages pack candidates above (below
// stage 1's threshold: none, every stage reads g).
// automatic: the candidates (about 8 bytes per element above eta1, ~2n bytes) pay off only
// while they stay in a cache-sized buffer and several stages reread them (on the reference 2-core
// EPYC, 32 MiB L3, a win at n = 1e7 with M >= 3 and a loss at n = 1e8: docs/BENCHMARKS.md, "SIDCo-E's
// routes").
// The predicted route packs only the x above a bound the stage-2 threshold will very likely
// pass: the exponential quantile of the stage-1 fit at kGuessMargin times stage 2's density
// (gradients have heavier tails than that law, so their stage-2 threshold lies higher). Its
// candidates are then a few times the final selection and cost little to write; when a stage's
// threshold comes out below the bound after all, that stage and the selection read g again.
// automatic takes it only while the expected candidates (about kGuessMargin x stage 2's count,
// stage 1 keeping a quarter) stay within 10% of g: beyond that (density 0.1 with M = 2),
// writing and re-reading them costs more than the read they save (docs/BENCHMARKS.md).
double tail_bound(std::size_t n, int stages, SidcoRoute route, const fitting::SidcoStages& plan, double first_mean) {
  constexpr double kGuessMargin = 1.5;
  constexpr double kFirstStageShare = 0.25;
  double bound = -1.0;
  if (route == SidcoRoute::automatic || route == SidcoRoute::predicted) {
    const double d = kGuessMargin * plan.tail_density();
    // (with a hair of margin for pow's rounding at the edge of the 10%)
    const bool worth = route == SidcoRoute::predicted || kFirstStageShare * d <= kAutomaticMaxCandidates * (1.0 + 1e-9);
    if (d < 1.0 && worth)
      bound = plan.threshold() + first_mean * std::log(1.0 / d);
    else if (route == SidcoRoute::predicted)
      bound = plan.threshold();  // no room: pack at eta1
  }
  // The candidates route is the predicted one with its bound at eta1 (every exceedance packed).
  constexpr std::size_t kCandidateMaxN = std::size_t{16} << 20;
  const bool automatic_candidates = stages >= 3 && n <= kCandidateMaxN;
  if (bound < plan.threshold() &&
      (route == SidcoRoute::candidates || (route == SidcoRoute::automatic && automatic_candidates)))
    bound = plan.threshold();
  return bound;
}

// The tail stages over the candidates above `bound`, collected in the first tail stage's read of
// g; a stage whose threshold falls below what the candidates hold reads g again. Returns whether
// the selection is in the workspace.
bool packed_tail(std::span<const float> g, double bound, fitting::SidcoStages& plan, SidcoWorkspace::Impl& w,
                 SidcoSelectResult& result) {
  double floor = bound;  // the candidates hold every x > floor
  bool more = plan.tail(collect_candidates(g, plan.threshold(), plan.threshold(), plan.tail_fields(), w, bound));
  ++result.full_reads;
  for (const auto& p : w.parts) result.candidates += p.size;
  while (more) {
    const double eta = plan.threshold();
    if (eta >= floor) {
      more = plan.tail(narrow_candidates(eta, eta, plan.tail_fields(), true, w));
      floor = eta;
    } else {  // the bound was too high for this stage: it reads g
      more = plan.tail(cpu::stats_above(g, eta, eta, plan.tail_fields()));
      ++result.full_reads;
    }
  }
  // The last stage moved the threshold: keep only what passes it (or compact g, below it).
  return select_from_candidates(plan.threshold(), floor, w);
}

// Runs the stages; the selection is then either in the workspace (candidates route) or still to
// be compacted from g at result.threshold (full-passes route).
// given: stage 1's statistics of g, taken by the pass that wrote g (sidco_select's `first`).
Pipeline run_stages(std::span<const float> g, double density, fitting::SidcoVariant variant, int stages,
                    const fitting::SidcoRule& rule, SidcoRoute route, SidcoWorkspace::Impl& w,
                    const fitting::MagnitudeStats* given) {
  Pipeline out;
  fitting::SidcoStages& plan = out.plan.emplace(g.size(), density, variant, stages, rule.recount);
  plan.set_scale(rule.scale);
  if (given && given->total() != g.size())
    throw gs::Error("sidco_select: the stage-1 statistics given count " + std::to_string(given->total()) +
                    " elements, g holds " + std::to_string(g.size()));
  // Given statistics leave nothing for the sampled route to save: stage 1 reads nothing.
  const double first_bound = given ? -1.0 : predicted_first_bound(g, density, variant, route, plan, w);
  const bool sampled = first_bound > 0.0;
  const fitting::MagnitudeStats first = given ? *given
                                        : sampled
                                            ? collect_candidates(g, 0.0, 0.0, plan.first_fields(), w, first_bound, true)
                                            : cpu::stats(g, plan.first_fields());
  out.result.nonfinite = first.nonfinite;
  bool more = plan.first(first);
  out.result.full_reads = given ? 0 : 1;
  if (sampled) {
    GS_ASSERT(!more);
    out.result.route = SidcoRoute::predicted;
    for (const auto& p : w.parts) out.result.candidates += p.size;
    out.in_workspace = select_from_candidates(plan.threshold(), first_bound, w);
    out.result.threshold = plan.threshold();
    out.result.stages = plan.stages_run();
    return out;
  }
  double bound = more ? tail_bound(g.size(), stages, route, plan, first.mean()) : -1.0;
  // The final threshold is the last stage's times the carried scale (SidcoRule::scale): below 1
  // it lands that much lower, under a bound guessed for the stages alone, and the selection would
  // read g again. The bound moves down with it, while it stays above stage 1's threshold.
  if (rule.scale < 1.0 && bound * rule.scale >= plan.threshold()) bound *= rule.scale;
  const bool packed = more && bound >= plan.threshold();
  out.result.route = !packed ? SidcoRoute::full_passes
                     : route == SidcoRoute::candidates || (route == SidcoRoute::automatic && bound == plan.threshold())
                         ? SidcoRoute::candidates
                         : SidcoRoute::predicted;
  if (packed) {
    out.in_workspace = packed_tail(g, bound, plan, w, out.result);
  } else {
    while (more) {
      more = plan.tail(cpu::stats_above(g, plan.threshold(), plan.threshold(), plan.tail_fields()));
      ++out.result.full_reads;
    }
  }
  out.result.threshold = plan.threshold();
  out.result.stages = plan.stages_run();
  return out;
}

void copy_out(const SidcoWorkspace::Impl& w, std::int32_t* idx, float* val) {
  std::size_t at = 0;
  for (const auto& p : w.parts) {
    if (p.size == 0) continue;  // a part that never grew holds no buffer
    std::memcpy(idx + at, p.idx.get(), p.size * sizeof(std::int32_t));
    if (val) std::memcpy(val + at, p.val.get(), p.size * sizeof(float));
    at += p.size;
  }
}

}  // namespace

float keep_largest(std::int32_t* idx, float* val, std::size_t m, std::uint64_t k) {
  std::vector<std::int32_t> pos(k);
  std::vector<float> kept(k);
  topk(std::span<const float>(val, m), k, std::span(pos), std::span(kept));
  for (std::uint64_t j = 0; j < k; ++j) {
    idx[j] = idx[pos[j]];  // pos ascending: each write lands at or before what it reads
    val[j] = kept[j];
  }
  float kth = std::numeric_limits<float>::max();
  for (float v : kept) kth = std::min(kth, std::fabs(v));
  return kth;
}

float keep_largest(Selection<std::int32_t>& sel, std::uint64_t k) {
  if (k > sel.indices.size() || sel.values.size() != sel.indices.size())
    throw gs::Error("keep_largest: " + std::to_string(k) + " of a selection of " + std::to_string(sel.indices.size()));
  const float kth = keep_largest(sel.indices.data(), sel.values.data(), sel.indices.size(), k);
  sel.indices.resize(k);
  sel.values.resize(k);
  return kth;
}

namespace {

// A selection in memory: m indices and values (values may be null).
struct Held {
  std::int32_t* idx;
  float* val;
  std::size_t m;
};

// Above the band: the held selection cut in place at SidcoStages::corrected's step on its own
// tail, when what that leaves lies inside the band; returns its size, else 0 (nothing changed).
std::size_t step_above(Pipeline& p, fitting::SidcoRule rule, Held h) {
  const double t = p.result.threshold;
  double excess = 0.0;
  for (std::size_t i = 0; i < h.m; ++i) excess += double(std::fabs(h.val[i])) - t;
  const double eta = p.plan->corrected({t, h.m, excess / double(h.m)}, rule.band);
  if (!(eta > t)) return 0;
  const float f = threshold_as_float(eta);
  std::size_t m = 0;
  for (std::size_t i = 0; i < h.m; ++i) m += selected_above(h.val[i], f) ? 1 : 0;
  if (m == 0 || p.plan->needs_correction(m, rule.band)) return 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < h.m; ++i)
    if (selected_above(h.val[i], f)) {
      h.idx[j] = h.idx[i];  // j <= i: each write lands at or before what it reads
      h.val[j] = h.val[i];
      ++j;
    }
  p.result.threshold = eta;
  p.result.corrected = true;
  return m;
}

// SIDCo's count correction of a selection in memory (rule.correct), in place: returns its new
// size. Above the band it steps the threshold up on the selection's own tail (step_above: no read
// of g) and keeps the target count's largest only where that step leaves the band; below it, it
// selects again from g at the corrected threshold (SidcoStages::corrected: one more read) and
// keeps the target count's largest if that lands above the band. `reselect(eta)` selects from g
// at eta and returns where that selection is held.
template <class Reselect>
std::size_t correct_in_memory(Pipeline& p, fitting::SidcoRule rule, Held h, Reselect&& reselect) {
  const fitting::SidcoStages& plan = *p.plan;
  p.result.estimate = p.result.threshold;  // SIDCo's own threshold and what it selected
  p.result.estimate_selected = h.m;
  if (!rule.correct || !plan.needs_correction(h.m, rule.band)) return h.m;
  const std::uint64_t k = plan.target();
  if (h.m < k) {
    const double eta = plan.corrected({p.result.threshold, h.m, 0.0}, rule.band);
    if (eta == p.result.threshold) return h.m;
    h = reselect(eta);
    ++p.result.full_reads;
    p.result.threshold = eta;
    p.result.corrected = true;
    if (!plan.needs_correction(h.m, rule.band) || h.m < k) return h.m;
  } else if (h.val) {
    if (const std::size_t m = step_above(p, rule, h)) return m;
  }
  // The k largest of a selection that holds every x above its threshold: g's k largest.
  if (!h.val) return h.m;  // no values to rank: the selection stands
  const float kth = keep_largest(h.idx, h.val, h.m, k);
  // The threshold just below the k-th largest (ties at it beyond the k are cut).
  p.result.threshold = std::nextafter(double(kth), 0.0);
  p.result.corrected = true;
  p.result.exact = true;
  return k;
}

}  // namespace

SidcoSelectResult sidco_select(std::span<const float> g, double density, fitting::SidcoVariant variant, int stages,
                               fitting::SidcoRule rule, std::span<std::int32_t> indices, std::span<float> values,
                               SidcoRoute route, SidcoWorkspace* ws, const fitting::MagnitudeStats* first) {
  check_int32(g.size());
  SidcoWorkspace local;
  auto& w = workspace_impl(ws ? *ws : local);
  Pipeline p = run_stages(g, density, variant, stages, rule, route, w, first);
  if (!p.in_workspace) {
    p.result.selected = compact_above(g, p.result.threshold, indices, values);  // throws if small
    ++p.result.full_reads;
  } else {
    const std::uint64_t total = workspace_total(w);
    if (indices.size() < total || (!values.empty() && values.size() < total))
      throw gs::Error("sidco_select: output buffers hold " + std::to_string(indices.size()) + " indices and " +
                      std::to_string(values.size()) + " values but " + std::to_string(total) +
                      " are selected; size them with n or use the Selection form");
    copy_out(w, indices.data(), values.empty() ? nullptr : values.data());
    p.result.selected = total;
  }
  float* vals = values.empty() ? nullptr : values.data();
  p.result.selected = correct_in_memory(p, rule, {indices.data(), vals, p.result.selected}, [&](double eta) {
    return Held{indices.data(), vals, compact_above(g, eta, indices, values)};
  });
  return p.result;
}

SidcoSelectResult sidco_select(std::span<const float> g, double density, fitting::SidcoVariant variant, int stages,
                               fitting::SidcoRule rule, Selection<std::int32_t>& out, SidcoRoute route,
                               SidcoWorkspace* ws, const fitting::MagnitudeStats* first) {
  check_int32(g.size());
  SidcoWorkspace local;
  auto& w = workspace_impl(ws ? *ws : local);
  Pipeline p = run_stages(g, density, variant, stages, rule, route, w, first);
  if (!p.in_workspace) {
    out = select_above(g, p.result.threshold);
    ++p.result.full_reads;
  } else {
    const std::uint64_t total = workspace_total(w);
    out.indices.resize(total);
    out.values.resize(total);
    copy_out(w, out.indices.data(), out.values.data());
  }
  const std::size_t m =
      correct_in_memory(p, rule, {out.indices.data(), out.values.data(), out.indices.size()}, [&](double eta) {
        out = select_above(g, eta);
        return Held{out.indices.data(), out.values.data(), out.indices.size()};
      });
  out.indices.resize(m);
  out.values.resize(m);
  p.result.selected = m;
  return p.result;
}

}  // namespace gs::kernels::cpu
