#pragma once
// Selection on a vector's own backend: the threshold's passes, the compaction above it, exact
// top-k and sidco-topk, with only the selection coming back to the host. A compressor holds one
// Selector: with the CUDA backend a host vector goes to the device once (place) and stays there
// from the estimate to the payload; a vector already on the device is used where it is.
#include <cstdint>
#include <memory>
#include <span>

#include "gs/fitting/passes.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/types.hpp"

namespace gs::kernels {

// A selection rule and its parameters, as select() takes them: what the compressors send.
struct SelectRequest {
  // top_nonzero: the min(k, non-zero) largest, what a compressor sends for a degenerate vector.
  // sidco_topk: topk's set for k = target_count(n, density), found above a bound placed from a
  // spread sample by SIDCo-E's stages (gs::fitting::SidcoTopkBound): about one read of g; the
  // report's `corrected` says the bound fell short (on a device also: its candidates overflowed
  // their room) and more of g was read.
  enum class Rule { above, topk, sidco, dgc, top_nonzero, sidco_topk };
  Rule rule = Rule::above;
  double threshold = -1.0;  // above: the finite x > threshold (< 0: every finite x)
  std::uint64_t k = 0;      // topk, top_nonzero: the min(k, finite) largest, ties at the k-th to the lowest indices
  double density = 0.0;     // sidco, dgc: the target, k = target_count(n, density)
  fitting::SidcoVariant variant = fitting::SidcoVariant::exponential;
  int stages = 1;  // sidco, sidco_topk: SIDCo's stages (sidco_topk: on its sample)
  fitting::SidcoRule sidco{};
  std::uint64_t seed = 0;  // dgc: its sample
  // sidco, dgc: where the rule places no threshold (a fit without valid parameters, a sample
  // without a finite value, or an empty SIDCo selection), the min(k, non-zero) largest instead,
  // as a compressor sends for a degenerate vector.
  bool fallback = false;
  // sidco on the CPU backend: stage 1's statistics of g (cpu::stats(g, sidco_first_fields(variant))
  // to the bit), taken by the pass that wrote g (cpu::stats_as_written), so that stage 1 reads
  // nothing; valid for the call. The other backends read g themselves.
  const fitting::MagnitudeStats* first = nullptr;
};

// Full reads of g by an exact top-k made by radix select on a device: three digit histograms and
// one selection that takes the keys above the k-th and its ties.
inline constexpr int kRadixTopkReads = 4;
// Full reads of g a SIDCo selection made where g lives (select(), from its report): the stages'
// sums, the selection above the estimate (which is also the count correction's count), the
// selection above a corrected threshold where the correction moved it, and g's exact top-k where
// the rule chose it. `correct` (the rule's count correction) adds no read of its own.
inline int sidco_resident_reads(const SelectionReport& r, bool /*correct*/) {
  return r.stages + 1 + (r.corrected == 2 ? 1 : 0) + (r.exact ? kRadixTopkReads : 0);
}

// g below is in the backend's memory: host memory for cpu and cuda-host, device memory for cuda
// (from place(), or the caller's own device vector). Selections hold ascending indices and the
// signed values g[i]; indices are int32, so n must stay below 2^31 (gs::Error otherwise).
class Selector {
 public:
  virtual ~Selector() = default;
  virtual BackendKind kind() const = 0;

  // The host vector in this backend's memory: in place on the CPU; a copy in a device buffer the
  // Selector keeps (reused while large enough) until the next place() with CUDA.
  virtual const float* place(std::span<const float> host) = 0;
  // The passes a threshold rule (gs/fitting/thresholds.hpp) reads g through.
  virtual std::unique_ptr<fitting::MagnitudePasses> passes(const float* g, std::uint64_t n) = 0;
  // Count of NaN/Inf in g. passes: 1.
  virtual std::uint64_t nonfinite(const float* g, std::uint64_t n) = 0;
  // The finite x > threshold (threshold < 0: every finite x). passes: 1.
  virtual void above(const float* g, std::uint64_t n, double threshold, Selection<std::int32_t>& out) = 0;
  // The min(k, finite) largest x, ties at the k-th keeping the lowest indices. passes: 2 to 4.
  virtual void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) = 0;
  // sidco-topk: the same set as topk(target_count(n, density)) for about one read of g.
  virtual SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                                       Selection<std::int32_t>& out) = 0;
  // SIDCo's threshold (variant, stages, rule) and the selection above it. The CPU runs its
  // pipeline (cpu::sidco_select, candidates kept between stages); the others their resident
  // selection (select(): the stages' sums, the count and the decisions stay on the device, the
  // selection comes back once): with rule.correct, a count above the band makes the selection
  // the one at the threshold stepped up on its excess (fitting::sidco_corrected_above), one below
  // it the selection at the corrected threshold, and either becomes g's exact top-k when its step
  // leaves the band (below it after the step up, above it after the secant). Every backend counts
  // the result's nonfinite; so does sidco_topk.
  virtual SidcoSelectResult sidco(const float* g, std::uint64_t n, double density, fitting::SidcoVariant variant,
                                  int stages, fitting::SidcoRule rule, Selection<std::int32_t>& out) = 0;

  // The last selection (of select, above, topk, sidco or sidco_topk) where it was made: its
  // indices and values in this backend's memory (device memory for cuda) and its report there,
  // valid until the next call. count: the pairs, once the host knows it (after fetch(), or from
  // the calls that fill an `out`); 0 while only the device does (after select(): the report's
  // count is then the one). The DDP hook gathers it there and zeroes it in the residual there.
  // The CPU backend keeps none (gs::Error).
  struct Resident {
    const std::int32_t* indices = nullptr;
    const float* values = nullptr;
    std::uint64_t count = 0;
    const SelectionReport* report = nullptr;
  };
  virtual Resident resident_selection() const;

  // The selection `request` asks for, made where g lives and left there with its report
  // (resident_selection()): on a device nothing is read back and nothing waits, every decision of
  // the rule taken there. The CPU makes it on the host.
  virtual Resident select(const float* g, std::uint64_t n, const SelectRequest& request) = 0;
  // The last select()'s selection and report on the host: one blocking synchronization on a
  // device (one more when the selection holds more than twice its target).
  virtual SelectionReport fetch(Selection<std::int32_t>& out) = 0;
};

// A Selector on `kind`'s backend; stream: the CUDA stream (cudaStream_t) its work is queued on
// (null: the default stream), ignored by the others. gs::Error for cuda without a usable GPU.
std::unique_ptr<Selector> make_selector(BackendKind kind, void* stream = nullptr);

}  // namespace gs::kernels
