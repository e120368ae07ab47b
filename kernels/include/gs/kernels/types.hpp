#pragma once
// Result types shared by the CPU (gs/kernels/cpu.hpp) and CUDA (gs/kernels/cuda.hpp) entry points.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace gs::kernels {

// Counts of x = |g| in `bins` log-spaced bins over [lo, hi): bin i holds
// lo*(hi/lo)^(i/bins) <= x < lo*(hi/lo)^((i+1)/bins). What falls outside is counted, not dropped.
struct LogHistogram {
  double lo = 0.0;
  double hi = 0.0;
  std::vector<std::uint64_t> counts;
  std::uint64_t below = 0;      // 0 < x < lo
  std::uint64_t above = 0;      // finite x >= hi
  std::uint64_t zeros = 0;      // x == 0
  std::uint64_t nonfinite = 0;  // NaN, +-Inf
  // Lower edge of bin i (i == counts.size() gives hi).
  double edge(std::size_t i) const;
};

// The histogram from per-slot counts in the layout every backend's pass counts into: [0] below,
// [1..bins] the bins, [bins + 1] above, [bins + 2] zeros, [bins + 3] non-finite.
template <class Count>
LogHistogram log_histogram_from_slots(double lo, double hi, const std::vector<Count>& per_slot) {
  const std::size_t bins = per_slot.size() - 4;
  LogHistogram h;
  h.lo = lo;
  h.hi = hi;
  h.below = per_slot[0];
  h.counts.assign(per_slot.begin() + 1, per_slot.begin() + 1 + static_cast<std::ptrdiff_t>(bins));
  h.above = per_slot[bins + 1];
  h.zeros = per_slot[bins + 2];
  h.nonfinite = per_slot[bins + 3];
  return h;
}

// Validates histogram arguments (0 < lo < hi finite, bins in [1, 1<<20]); throws gs::Error.
void check_log_histogram_args(double lo, double hi, int bins);

// A selection in host memory: indices ascending and their signed values g[i].
template <class Index>
struct Selection {
  std::vector<Index> indices;
  std::vector<float> values;
};

// How cpu::sidco_select organises its reads (gs/kernels/cpu.hpp describes each route).
enum class SidcoRoute { automatic, full_passes, candidates, predicted };

// What a SIDCo selection (cpu::sidco_select) or a sidco-topk selection (any backend) did.
struct SidcoSelectResult {
  double threshold = 0.0;
  int stages = 0;                            // stages run (as ThresholdResult::stages)
  std::uint64_t selected = 0;                // elements written
  SidcoRoute route = SidcoRoute::automatic;  // the route taken
  int full_reads = 0;                        // reads of all of g
  std::uint64_t candidates =
      0;  // candidates/predicted routes: elements packed (by the first tail stage, or by stage 1 with one stage)
  std::uint64_t nonfinite = 0;  // NaN/Inf in g (the CPU counts them in its first read)
  bool corrected = false;       // SIDCo's count correction moved the threshold (SidcoRule)
  bool exact = false;           // the selection ended on exact top-k (the correction's guard)
  // SIDCo's own threshold, before any correction, and what it selected (SIDCo's estimate).
  double estimate = 0.0;
  std::uint64_t estimate_selected = 0;
};

// What a selection made where its vector lives reports, beside it (device memory for cuda: the
// device writes it, nothing waits) and, once fetched, on the host. Plain data.
enum class SelectionFailure : std::int32_t {
  none = 0,
  fit,               // SIDCo's first fit had no valid parameters (no fallback asked)
  k_exceeds_finite,  // top-k asked for more than the finite values
  sample,            // DGC's sample held no finite value (no fallback asked)
};
struct SelectionReport {
  std::uint64_t count = 0;      // pairs in the selection (ascending indices, their values)
  std::uint64_t nonfinite = 0;  // NaN/Inf in g
  double threshold = 0.0;       // the rule's threshold (exact top-k: at or just below its k-th |g|)
  std::int32_t stages = 0;      // SIDCo's stages run; DGC 1, or 2 with its exact step
  std::int32_t corrected = 0;   // SIDCo's count correction moved the threshold (2: and selected again, one more read)
  std::int32_t exact = 0;       // the rule kept exactly the top-k
  SelectionFailure failure = SelectionFailure::none;
  // SIDCo: its own threshold before any correction (the estimate; NaN for another rule, or where
  // the fit failed) and the count it selected.
  double estimate = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t estimate_count = 0;
};

// Validates a selection threshold (not NaN); throws gs::Error.
void check_threshold(double threshold, const char* what);

}  // namespace gs::kernels
