// CPU backend: sidco-topk (cpu.hpp, sidco_topk): exactly the k largest |g|, found above a bound
// that SIDCo-E's stages place from a spread sample, in about one read of g.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "gs/base/radix_select.hpp"
#include "sidco_workspace.hpp"

namespace gs::kernels::cpu {

using detail::check_int32;
using detail::collect_candidates;
using detail::workspace_total;

namespace {

constexpr std::size_t kSerialBelow = std::size_t{1} << 20;

// |x|'s bits (the sign cleared): ordered as the magnitudes.
std::uint32_t magnitude_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b & 0x7fffffffu;
}

// The k-th largest |x| among the workspace's candidates.
float kth_largest(std::uint64_t k, SidcoWorkspace::Impl& w) {
  const int nt = static_cast<int>(w.parts.size());
  const auto bits_of = magnitude_bits;
  std::vector<std::array<std::uint32_t, 4096>> hist(static_cast<std::size_t>(nt));
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
  for (int r = 0; r < nt; ++r) {
    auto& h = hist[static_cast<std::size_t>(r)];
    h.fill(0);
    const auto& p = w.parts[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < p.size; ++i) ++h[bits_of(p.val[i]) >> 19];
  }
  std::uint32_t bucket = 4096;
  std::uint64_t above = 0;
  for (;;) {  // the bucket holding the k-th largest, from the top
    std::uint64_t c = 0;
    for (const auto& h : hist) c += h[bucket - 1];
    if (above + c >= k || bucket == 1) break;
    above += c;
    --bucket;
  }
  --bucket;
  // The bucket's values (few, or split further by radix_largest), gathered per part.
  std::vector<std::vector<float>> in_bucket(static_cast<std::size_t>(nt));
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
  for (int r = 0; r < nt; ++r) {
    const auto& p = w.parts[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < p.size; ++i)
      if ((bits_of(p.val[i]) >> 19) == bucket) in_bucket[static_cast<std::size_t>(r)].push_back(std::fabs(p.val[i]));
  }
  std::vector<float>& sort_scratch = w.sample;
  const RadixPick pick = radix_largest(
      [&](auto&& f) {
        for (const auto& part : in_bucket)
          for (float x : part) f(x);
      },
      k - above, sort_scratch);
  return pick.value;
}

// Copies exactly the k largest |x| among the workspace's candidates (ascending indices across the
// parts) into out: those above the k-th largest magnitude, then the lowest-index ties at it, the
// rule of topk(). Each part is read by the thread that wrote it (its candidates are still in that
// core's cache): a histogram of the top 12 bits of every |x| finds the bucket of the k-th largest,
// whose values are then sorted in part (radix_largest), and one more pass counts each part's
// values above it and ties, which places each part's output. Returns the k-th largest |x|.
float keep_top(std::uint64_t k, SidcoWorkspace::Impl& w, Selection<std::int32_t>& out) {
  const int nt = static_cast<int>(w.parts.size());
  const auto bits_of = magnitude_bits;
  const float kth_value = kth_largest(k, w);
  const std::uint32_t kth = bits_of(kth_value);
  // Each part's values above the k-th and ties at it; the ties kept go to the lowest indices.
  std::vector<std::uint64_t> greater(static_cast<std::size_t>(nt)), equal(static_cast<std::size_t>(nt));
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
  for (int r = 0; r < nt; ++r) {
    const auto& p = w.parts[static_cast<std::size_t>(r)];
    std::uint64_t g = 0, e = 0;
    for (std::size_t i = 0; i < p.size; ++i) {
      const std::uint32_t b = bits_of(p.val[i]);
      g += b > kth ? 1 : 0;
      e += b == kth ? 1 : 0;
    }
    greater[static_cast<std::size_t>(r)] = g;
    equal[static_cast<std::size_t>(r)] = e;
  }
  std::uint64_t ties_left = k;
  for (auto g : greater) ties_left -= g;
  std::vector<std::uint64_t> offset(static_cast<std::size_t>(nt) + 1, 0), ties(static_cast<std::size_t>(nt));
  for (std::size_t r = 0; r < static_cast<std::size_t>(nt); ++r) {
    ties[r] = std::min(equal[r], ties_left);
    ties_left -= ties[r];
    offset[r + 1] = offset[r] + greater[r] + ties[r];
  }
  GS_ASSERT(offset.back() == k);
  // A spare slot per part: the branch-free copy writes every candidate at the next place and moves
  // only past the kept ones (which of a dense set are kept is unpredictable); a part's writes
  // after its last kept one go to its own spare slot.
  out.indices.resize(k + static_cast<std::size_t>(nt));
  out.values.resize(k + static_cast<std::size_t>(nt));
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
  for (int r = 0; r < nt; ++r) {
    const auto& p = w.parts[static_cast<std::size_t>(r)];
    std::int32_t* out_idx = out.indices.data();
    float* out_val = out.values.data();
    std::uint64_t at = offset[static_cast<std::size_t>(r)], tie_budget = ties[static_cast<std::size_t>(r)];
    const std::uint64_t end = offset[static_cast<std::size_t>(r) + 1];
    for (std::size_t i = 0; i < p.size; ++i) {
      const std::uint32_t b = bits_of(p.val[i]);
      const bool tie = b == kth && tie_budget > 0;
      tie_budget -= tie ? 1 : 0;
      const std::uint64_t slot = at < end ? at : k + static_cast<std::uint64_t>(r);
      out_idx[slot] = p.idx[i];
      out_val[slot] = p.val[i];
      at += (b > kth || tie) ? 1 : 0;
    }
  }
  out.indices.resize(k);
  out.values.resize(k);
  return kth_value;
}

}  // namespace

SidcoSelectResult sidco_topk(std::span<const float> g, double density, int stages, Selection<std::int32_t>& out,
                             SidcoWorkspace* ws) {
  check_int32(g.size());
  SidcoWorkspace local;
  auto& w = workspace_impl(ws ? *ws : local);
  fitting::SidcoTopkBound& plan = w.topk_plan;
  plan.reset(g.size(), density, stages);
  SidcoSelectResult r;
  r.route = SidcoRoute::predicted;
  out.indices.clear();
  out.values.clear();
  if (g.empty()) return r;
  spread_sample(g, fitting::SidcoTopkBound::sample_lines(g.size()), fitting::SidcoTopkBound::kLineLength, w.sample);
  double bound = plan.first(w.sample);
  // A vector of a few chunks goes faster on one thread than through a parallel region's start
  // and barriers (and training runs several workers on the cores anyway).
  const int max_threads = g.size() < kSerialBelow ? 1 : 0;
  std::uint64_t keep = 0;
  for (;;) {  // one read of g per bound: every finite x above it packed, and the finite count
    const fitting::MagnitudeStats s =
        collect_candidates(g, 0.0, 0.0, fitting::StatsFields{}, w, bound, true, max_threads);
    ++r.full_reads;
    r.nonfinite = s.nonfinite;
    const std::uint64_t finite = s.count + s.zeros;
    if (r.full_reads == 1) r.candidates = workspace_total(w);
    if (plan.holds(workspace_total(w), finite)) {
      keep = std::min(plan.k(), finite);
      break;
    }
    bound = plan.lower();
  }
  r.threshold = keep ? double(keep_top(keep, w, out)) : 0.0;
  r.stages = plan.stages_run();
  r.selected = keep;
  return r;
}

}  // namespace gs::kernels::cpu
