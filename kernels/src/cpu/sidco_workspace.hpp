#pragma once
// The CPU backend's SIDCo workspace (cpu.hpp, SidcoWorkspace) and the reads over it that both
// SIDCo's pipeline (sidco.cpp) and sidco-topk (sidco_topk.cpp) make. Internal to kernels/.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compact.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/cpu.hpp"

namespace gs::kernels::cpu {

// Candidates per thread range, and where each chunk of g has its candidates inside its range's
// buffer (so statistics are taken and merged per chunk of g, whatever the thread count).
struct SidcoWorkspace::Impl {
  std::vector<detail::Scratch<std::int32_t>> parts;
  std::vector<std::size_t> seg_begin, seg_len;
  std::vector<fitting::MagnitudeStats> chunk_stats;
  std::vector<float> sample;
  fitting::SidcoTopkBound topk_plan{1, 1.0, 1};  // sidco_topk's plan, its buffers kept between calls
};

namespace detail {

// One read of g: the candidates x > t into the workspace, and the statistics of y = x - shift
// over them (taken right after each chunk is packed, while it is in cache).
// With pack_above > threshold the statistics (of x > threshold) are taken from g's chunk and only
// the x > pack_above are packed (the predicted route). whole: the statistics are those of every
// x (stage 1's; threshold and shift unused) and the x > pack_above are packed (the sampled route).
fitting::MagnitudeStats collect_candidates(std::span<const float> g, double threshold, double shift,
                                           fitting::StatsFields f, SidcoWorkspace::Impl& w, double pack_above = -1.0,
                                           bool whole = false, int max_threads = 0);
// The candidates the workspace holds, over its parts.
std::uint64_t workspace_total(const SidcoWorkspace::Impl& w);
// gs::Error when n elements cannot be addressed by int32 indices.
void check_int32(std::size_t n);

}  // namespace detail
}  // namespace gs::kernels::cpu
