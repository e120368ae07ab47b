#pragma once
// CPU backend over host spans: every heavy pass, parallel over the cores (OpenMP) in fixed chunks
// of kChunk elements. Partial results are combined in chunk order, so every result is the same
// whatever the thread count. Passes over the data are counted per function ("passes: N").
//
// Selection convention everywhere: element i is "above t" when g[i] is finite and |g[i]| > t.
// Compaction and top-k write indices in ascending order and the signed values g[i].
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gs/fitting/passes.hpp"
#include "gs/fitting/stats.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels::cpu {

// Elements per work chunk: 256 KiB of floats, so a fused step stays in L2.
inline constexpr std::size_t kChunk = std::size_t{1} << 16;

// Threads the CPU backend uses (OpenMP's count; 1 without OpenMP).
int threads();

// Sum of g: the plain read pass that benchmarks divide by. passes: 1.
double sum(std::span<const float> g);

// Fused statistics of x = |g| (see gs::MagnitudeStats). ln x via detail::fast_log: absolute error
// per element < 1e-7. passes: 1.
// `fields` picks the sums beyond count, zeros, nonfinite, sum, min, max (the others come back
// NaN): without ln x and x^2 the pass runs at memory speed (see docs/BENCHMARKS.md).
fitting::MagnitudeStats stats(std::span<const float> g, fitting::StatsFields fields = fitting::StatsFields::all());
// stats(out, fields) of a vector as it is written: fill(begin, end) writes out[begin, end), one
// chunk of kChunk at a time (chunks in parallel, as stats() reads them), and each chunk's
// statistics are taken right after it is written, while it is still in L2. The same chunks merged
// in the same order: the result is stats(out, fields)'s to the bit, without reading out again
// from memory. fill must not throw (it runs inside the parallel loop). passes: 0 of its own.
fitting::MagnitudeStats stats_as_written(std::span<const float> out, fitting::StatsFields fields,
                                         const std::function<void(std::size_t, std::size_t)>& fill);
// Statistics of y = x - shift over the finite x > threshold. passes: 1.
fitting::MagnitudeStats stats_above(std::span<const float> g, double threshold, double shift,
                                    fitting::StatsFields fields = fitting::StatsFields::all());
// Count of finite x > threshold. passes: 1.
std::uint64_t count_above(std::span<const float> g, double threshold);
// Grimshaw sums over y = x - shift, x > threshold. passes: 1.
fitting::GpSums gp_sums(std::span<const float> g, double theta, double threshold, double shift);

// Compaction of the elements above threshold into caller buffers: indices ascending and their
// signed values (values may be empty to skip them). Returns how many were written. Throws
// gs::Error, before writing anything, when the buffers are too small for the selection (size them
// with count_above, or n) or when int32 indices cannot address g. passes: 1. With buffers of n
// each thread packs its range at its own offset (AVX2 left-pack), then one move closes the gaps;
// smaller buffers get per-thread scratch and one copy of the selection.
std::uint64_t compact_above(std::span<const float> g, double threshold, std::span<std::int32_t> indices,
                            std::span<float> values);
std::uint64_t compact_above(std::span<const float> g, double threshold, std::span<std::int64_t> indices,
                            std::span<float> values);

// The same into fresh vectors (one pass: per-thread scratch, then exact-size vectors).
using kernels::Selection;
Selection<std::int32_t> select_above(std::span<const float> g, double threshold);
Selection<std::int64_t> select_above64(std::span<const float> g, double threshold);

// SIDCo threshold (gs::SidcoStages, algorithms.md section 2) and the compaction of its selection,
// as one pipeline. Two routes:
//   full_passes: stage 1 and every tail stage read all of g (light statistics: no ln x), then one
//     compaction: M + 1 reads of g.
//   candidates: stage 1 reads g; the first tail stage compacts the exceedances x > eta1 (about a
//     quarter of g at d1 = 0.25) into the workspace and takes their statistics in the same read;
//     each later stage re-compacts the candidates in place at its threshold while taking the
//     next statistics, and the final selection comes from the candidates: 2 reads of g plus
//     passes over the shrinking candidates (about 8 bytes written per candidate once).
//   predicted: as candidates, but the first tail stage packs only the x above a predicted bound
//     (the stage-1 exponential fit's quantile at 1.5x stage 2's density; gradients' heavier tails put
//     the stage-2 threshold above it): the candidates are a few times the selection, so every M
//     costs 2 reads of g plus small passes. A stage whose threshold falls below the bound reads g
//     instead (full_reads says how often), and so does the selection then.
//     With one stage (SIDCo-E, M = 1 or density >= 0.25), density < 1/3 and n >= 1 Mi elements the
//     bound is stage 1's threshold at 3x density fitted to a sample of g (4096 cache lines spread
//     evenly over it), and stage 1's read packs the x above it: 1 read of g plus the sample when
//     stage 1's threshold comes out at or above the bound; else a second read compacts g. Other
//     one-stage calls run full_passes.
//   automatic: predicted when its candidates are expected within 10% of g (M = 2 and 3 at
//     densities 0.01 and 0.001, M = 4 and 5 at 0.001; one stage up to density = 1/30); otherwise
//     candidates for M >= 3 and n <= 16 Mi elements, full_passes beyond.
// The threshold equals gs::sidco_threshold's up to the rounding of its sums (blocks differ).
using kernels::SidcoRoute;

// Memory the candidates and predicted routes reuse between calls (one per caller, e.g. per compressor): about
// 8 bytes per candidate, kept until the workspace is destroyed.
class SidcoWorkspace {
 public:
  SidcoWorkspace();
  ~SidcoWorkspace();
  SidcoWorkspace(SidcoWorkspace&&) noexcept;
  SidcoWorkspace& operator=(SidcoWorkspace&&) noexcept;
  std::size_t bytes() const;  // memory held now
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend Impl& workspace_impl(SidcoWorkspace&);
};

using kernels::SidcoSelectResult;

// Writes the selection (indices ascending, signed values; values may be empty) into caller
// buffers. gs::Error, before anything is written, for bad arguments (as sidco_threshold) or when
// the buffers hold fewer than the selection (size them with n, or take the Selection form).
// ws may be null (a temporary workspace is used). With rule.correct, a selection outside the
// correction's band gets the corrected threshold (SidcoStages::corrected): a higher one narrows
// the selection in memory (no read of g unless values is empty), a lower one compacts g again
// (one more read). first, when given, is stats(g, sidco_first_fields(variant)) as a pass that
// wrote g took it (stats_as_written): stage 1 then reads nothing (full_reads leaves it out) and
// the one-stage route packs nothing, so the selection compacts g; the threshold and the selection
// are those of the call without it. gs::Error when it does not count g's n elements.
SidcoSelectResult sidco_select(std::span<const float> g, double density, fitting::SidcoVariant variant, int stages,
                               fitting::SidcoRule rule, std::span<std::int32_t> indices, std::span<float> values,
                               SidcoRoute route = SidcoRoute::automatic, SidcoWorkspace* ws = nullptr,
                               const fitting::MagnitudeStats* first = nullptr);
// The same into fresh vectors of exactly the selection's size.
SidcoSelectResult sidco_select(std::span<const float> g, double density, fitting::SidcoVariant variant, int stages,
                               fitting::SidcoRule rule, Selection<std::int32_t>& out,
                               SidcoRoute route = SidcoRoute::automatic, SidcoWorkspace* ws = nullptr,
                               const fitting::MagnitudeStats* first = nullptr);

// sidco-topk (gs::SidcoTopkBound): exactly the min(k, finite) largest |g| (k = target_count(n,
// density)), the set topk() selects, ties included, found with a SIDCo bound: a spread sample of g
// places the bound, one read of g packs every finite x above it into the workspace (taking the
// finite count with it), and the k largest are picked among those candidates in memory. A bound
// that leaves fewer than k candidates costs one more read with a lower one (full_reads counts the
// reads; candidates, the first read's). threshold: the k-th largest |g|; stages: SIDCo's stages
// fitted on the sample. gs::Error for a density outside (0, 1] or stages < 1.
SidcoSelectResult sidco_topk(std::span<const float> g, double density, int stages, Selection<std::int32_t>& out,
                             SidcoWorkspace* ws = nullptr);

// Exact top-k by magnitude over the finite elements: exactly k indices (ascending) and values.
// Ties at the k-th magnitude keep the lowest indices. Radix select over the bit patterns of |g|:
// pass 1 histograms the top 11 bits; pass 2 emits every element of a higher bin and collects the
// threshold bin's candidates, whose remaining 20 bits are resolved in memory. passes: 2.
// Throws gs::Error when k exceeds the finite count or the buffers hold fewer than k.
void topk(std::span<const float> g, std::uint64_t k, std::span<std::int32_t> indices, std::span<float> values);
void topk(std::span<const float> g, std::uint64_t k, std::span<std::int64_t> indices, std::span<float> values);

// Keeps, in place, the k largest magnitudes of a selection in host memory (indices ascending;
// ties at the k-th keep the lowest indices, as topk()), the first k of m; returns the k-th largest
// magnitude. For a selection of every x above some threshold, they are g's k largest. The
// Selection form checks k <= its size (gs::Error).
float keep_largest(std::int32_t* indices, float* values, std::size_t m, std::uint64_t k);
float keep_largest(Selection<std::int32_t>& sel, std::uint64_t k);

// The k-th largest finite x (k = 1: the maximum); exact. passes: 2.
float kth_largest(std::span<const float> g, std::uint64_t k);

// Log-spaced histogram of x (see LogHistogram). passes: 1.
LogHistogram log_histogram(std::span<const float> g, double lo, double hi, int bins);

// Finite non-zero x, sorted ascending: all of them, or when there are more than max_points a
// uniform subsample without replacement of exactly max_points: the elements with the smallest
// detail::element_hash(seed, i), so the CUDA backend draws the same ones. passes: 2 (count, then
// a hash filter that keeps about 1.1 max_points candidates; a rare third when too few survive).
std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                  bool* subsampled);

// m values |g[j]| with j = hash_to_range(element_hash(seed, t), n), t = 0..m-1: uniform with
// replacement (DGC's sample). Reads m scattered elements, not a pass.
std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed);

// `lines` runs of `line_length` consecutive values spread evenly over g (gs::spread_line_start),
// into out (resized); all of g when it is shorter than that. Scattered reads, not a pass.
void spread_sample(std::span<const float> g, std::uint64_t lines, std::uint64_t line_length, std::vector<float>& out);

// gs::MagnitudePasses over a host span through the functions above.
class CpuPasses final : public gs::fitting::MagnitudePasses {
 public:
  explicit CpuPasses(std::span<const float> g) : g_(g) {}
  std::uint64_t size() const override { return g_.size(); }
  fitting::MagnitudeStats stats() override { return cpu::stats(g_); }
  fitting::MagnitudeStats stats_above(double threshold, double shift) override;
  fitting::MagnitudeStats stats_light(fitting::StatsFields fields) override { return cpu::stats(g_, fields); }
  fitting::MagnitudeStats stats_above_light(double threshold, double shift, fitting::StatsFields fields) override {
    return cpu::stats_above(g_, threshold, shift, fields);
  }
  std::uint64_t count_above(double threshold) override;
  fitting::GpSums gp_sums(double theta, double threshold, double shift) override;
  std::vector<double> sorted_sample(std::uint64_t max_points, std::uint64_t seed, bool* subsampled) override;
  double kth_largest(std::uint64_t k) override;
  std::vector<float> random_sample(std::uint64_t m, std::uint64_t seed) override;
  std::vector<float> spread_sample(std::uint64_t lines, std::uint64_t line_length) override;

 private:
  std::span<const float> g_;
};

}  // namespace gs::kernels::cpu
