#pragma once
// Internal: the sparse all-reduce of one vector (exchange "sparse-allreduce", docs/architecture.md),
// in the manner of Ok-Topk (Li and Hoefler, PPoPP'22): a worker's link carries about
// (1 + kSparseAllreduceKeep) k (W-1)/W pairs, where the all-gather brings it (W-1)k, and the update
// holds up to kSparseAllreduceKeep k of the workers' summed values, the largest.
//   1. each worker selects from its accumulator (its compressor); one that met NaN/Inf sends none;
//   2. split and reduce: the index space is cut into W regions (the bounds every worker holds
//      alike); each worker sends the pairs of region r to worker r (all-to-all), and sums what it
//      receives in rank order;
//   3. balance: one all-reduce of the W regions' counts and of the workers that met NaN/Inf (any:
//      the vector is skipped everywhere); with K = kSparseAllreduceKeep k, region r keeps its
//      largest round(K * count_r / total) sums (all of them when the total is at most K);
//   4. the kept pairs are all-gathered, their sizes known from the counts (no round of sizes):
//      every worker holds the same pairs, the update is their sum over W.
// Four collective rounds in all: the all-to-all's sizes and pairs, the counts, the kept pairs.
// A worker's own contribution is its selected values at the update's indices: error feedback takes
// that out of its residual, and the rest of its selection stays there. The next bounds split the
// update's indices into W equal counts (rebalancing, the same on every worker); they are the state
// this exchange carries.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/state_stream.hpp"
#include "gs/compress/collectives.hpp"
#include "gs/compress/compressor.hpp"

namespace gs::compress::detail {

struct SparseAllreduceOutcome {
  bool skipped = false;                    // a worker met NaN or Inf: nothing was gathered
  Payload mine;                            // this worker's contribution: its selected values at the update's indices
  CompressInfo info;                       // its selection's
  std::uint64_t wire_bytes = 0;            // what this worker sent (its own parts excluded)
  std::vector<std::uint64_t> next_bounds;  // W + 1 region bounds for the next step
};

// W regions of equal length over [0, n): bounds b_0 = 0 <= b_1 <= ... <= b_W = n.
std::vector<std::uint64_t> even_bounds(std::uint64_t n, int workers);
// gs::Error unless bounds are W + 1 non-decreasing values from 0 to n (a checkpoint's, checked).
void check_bounds(std::span<const std::uint64_t> bounds, std::uint64_t n, int workers);

// The regions of every vector a compressor exchanges this way (BucketCompressor's per bucket
// layout, ModelCompressor's per group), as checkpoints keep them.
using Regions = std::map<std::string, std::vector<std::uint64_t>>;
// Whether an exchange setting may run the sparse all-reduce, and so keeps regions.
inline bool keeps_regions(ExchangeMode mode) {
  return mode == ExchangeMode::sparse_allreduce || mode == ExchangeMode::automatic;
}
// The bounds of vector `name` (n elements, W workers): those kept, else even ones.
std::vector<std::uint64_t> bounds_of(const Regions& regions, const std::string& name, std::uint64_t n, int workers);
void save_regions(StateWriter& w, const Regions& regions);
// r.fail unless each vector's bounds start at 0 and do not decrease (their end and count are
// checked where they are used: check_bounds).
Regions load_regions(StateReader& r);

// out (acc.size()) receives the update (zeros off its indices). bounds: this vector's regions.
SparseAllreduceOutcome sparse_allreduce(Compressor& c, std::span<const float> acc, std::string_view tensor,
                                        std::span<const std::uint64_t> bounds, Collectives& comm, std::span<float> out);

}  // namespace gs::compress::detail
