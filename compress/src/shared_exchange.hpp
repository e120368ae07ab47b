#pragma once
// Internal: the shared exchange of one vector (exchange "shared", docs/architecture.md): the
// workers agree on one set of indices, the selection of this vector's leader (a worker that
// rotates with the step and the vector, as cyclic local top-k does), and all-reduce only their
// values there. A worker's bytes stay at about k indices and k values whatever the number of
// workers, where an all-gather of every worker's pairs brings each (W - 1) k pairs.
//   1. the leader selects from its accumulator (its compressor, as an all-gather's worker does);
//   2. one all-reduce of {the leader's count and stages, any worker's NaN/Inf};
//   3. one of the indices (the leader's, zeros from the others), one of each worker's values there.
// Every worker's own contribution (its accumulator at the indices) is what error feedback takes out
// of its residual; the update is the values' mean at the indices.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gs/compress/collectives.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/base/error.hpp"
#include "host_vectors.hpp"

namespace gs::compress::detail {

struct SharedOutcome {
  bool skipped = false;          // a worker met NaN or Inf: nothing was exchanged
  Payload mine;                  // this worker's contribution: its accumulator at the shared indices
  CompressInfo info;             // the leader's selection (its count and stages, on every worker)
  std::uint64_t wire_bytes = 0;  // what this worker put into the all-reduces
};

// The leader of vector `index` at step `step` among `workers`.
inline int shared_leader(std::int64_t step, int index, int workers) {
  return int((step + std::int64_t(index)) % std::int64_t(workers));
}

// out (acc.size()) receives the workers' mean at the leader's indices, zeros elsewhere.
inline SharedOutcome shared_exchange(Compressor& c, std::span<const float> acc, std::string_view tensor, int leader,
                                     Collectives& comm, std::span<float> out) {
  SharedOutcome r;
  const bool lead = comm.rank() == leader;
  Compressed selection;
  if (lead) selection = c.compress(acc, tensor);
  std::int64_t head[3] = {lead ? std::int64_t(selection.payload.count()) : 0, lead ? selection.info.stages : 0,
                          any_nonfinite(acc) ? 1 : 0};
  comm.allreduce_sum(std::span<std::int64_t>(head, 3));
  r.wire_bytes = sizeof head;
  if (head[2] > 0) {
    r.skipped = true;
    return r;
  }
  const auto count = std::uint64_t(head[0]);
  const std::uint64_t n = acc.size();
  std::vector<std::int32_t> idx(count, 0);
  if (lead) idx.assign(selection.payload.indices.begin(), selection.payload.indices.end());
  std::vector<float> values(count);
  if (count > 0) {
    comm.allreduce_sum(std::span<std::int32_t>(idx));
    for (std::uint64_t j = 0; j < count; ++j) {
      if (idx[j] < 0 || std::uint64_t(idx[j]) >= n)
        throw Error("the shared exchange's leader (worker " + std::to_string(leader) + ") sent index " +
                    std::to_string(idx[j]) + " for a vector of " + std::to_string(n) +
                    " (do all workers run the same model and settings?)");
      values[j] = acc[std::size_t(idx[j])];
    }
  }
  r.mine.n = n;
  r.mine.indices = idx;
  r.mine.values = values;
  if (count > 0) comm.allreduce_sum(std::span<float>(values));
  std::fill(out.begin(), out.end(), 0.0f);
  const float inv = 1.0f / float(comm.world_size());
  for (std::uint64_t j = 0; j < count; ++j) out[std::size_t(idx[j])] = values[j] * inv;
  r.wire_bytes += count * (sizeof(std::int32_t) + sizeof(float));
  r.info = lead ? selection.info : CompressInfo{};
  r.info.n = n;
  r.info.selected = count;
  r.info.target_density = c.density();
  r.info.stages = int(head[1]);
  return r;
}

}  // namespace gs::compress::detail
