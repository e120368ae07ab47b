#include "sparse_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "gs/base/error.hpp"
#include "host_vectors.hpp"

namespace gs::compress::detail {
namespace {

constexpr std::size_t kPairBytes = sizeof(std::int32_t) + sizeof(float);

struct Pair {
  std::int32_t index;
  float value;
};

void put_pairs(std::vector<std::byte>& buf, std::span<const Pair> pairs) {
  buf.resize(pairs.size() * kPairBytes);
  std::byte* p = buf.data();
  for (const Pair& q : pairs) {
    std::memcpy(p, &q.index, sizeof q.index);
    std::memcpy(p + sizeof q.index, &q.value, sizeof q.value);
    p += kPairBytes;
  }
}

std::vector<Pair> get_pairs(std::span<const std::byte> buf, int from, const char* what) {
  if (buf.size() % kPairBytes != 0)
    throw Error(std::string("sparse all-reduce: worker ") + std::to_string(from) + "'s " + what +
                " is not whole (index, value) pairs (do all workers run the same model and settings?)");
  std::vector<Pair> pairs(buf.size() / kPairBytes);
  const std::byte* p = buf.data();
  for (Pair& q : pairs) {
    std::memcpy(&q.index, p, sizeof q.index);
    std::memcpy(&q.value, p + sizeof q.index, sizeof q.value);
    p += kPairBytes;
  }
  return pairs;
}

// The region of index i: the r with bounds[r] <= i < bounds[r + 1].
int region_of(std::span<const std::uint64_t> bounds, std::uint64_t i) {
  return int(std::upper_bound(bounds.begin() + 1, bounds.end() - 1, i) - (bounds.begin() + 1));
}

// Step 2 of sparse_allreduce: this worker's selected pairs to their regions' workers (an
// all-to-all), and its own region's pairs summed in rank order, ascending by index; wire_bytes grows
// by what it sent to the others.
std::vector<Pair> split_and_reduce(const Payload& sel, std::span<const std::uint64_t> bounds, Collectives& comm,
                                   std::uint64_t& wire_bytes) {
  const int w = comm.world_size(), me = comm.rank();
  const std::uint64_t n = bounds.back();
  std::vector<std::vector<Pair>> by_region(static_cast<std::size_t>(w));
  for (std::size_t j = 0; j < sel.count(); ++j) {
    const auto i = sel.indices[j];
    if (i < 0 || std::uint64_t(i) >= n)
      throw Error("sparse all-reduce: the selection holds index " + std::to_string(i) + " of a vector of " +
                  std::to_string(n));
    by_region[std::size_t(region_of(bounds, std::uint64_t(i)))].push_back({i, sel.values[j]});
  }
  std::vector<std::vector<std::byte>> parts(static_cast<std::size_t>(w));
  for (int d = 0; d < w; ++d) {
    put_pairs(parts[std::size_t(d)], by_region[std::size_t(d)]);
    if (d != me) wire_bytes += parts[std::size_t(d)].size();
  }
  const auto received = comm.alltoall(parts);
  std::vector<Pair> mine_in;  // (index, value) from every worker, stable by rank
  for (int s = 0; s < w; ++s)
    for (const Pair& q : get_pairs(received[std::size_t(s)], s, "part")) {
      if (q.index < 0 || std::uint64_t(q.index) < bounds[std::size_t(me)] ||
          std::uint64_t(q.index) >= bounds[std::size_t(me) + 1])
        throw Error("sparse all-reduce: worker " + std::to_string(s) + " sent index " + std::to_string(q.index) +
                    " outside this worker's region [" + std::to_string(bounds[std::size_t(me)]) + ", " +
                    std::to_string(bounds[std::size_t(me) + 1]) +
                    ") (do all workers run the same model and settings?)");
      mine_in.push_back(q);
    }
  std::stable_sort(mine_in.begin(), mine_in.end(), [](const Pair& a, const Pair& b) { return a.index < b.index; });
  std::vector<Pair> reduced;
  for (const Pair& q : mine_in) {
    if (!reduced.empty() && reduced.back().index == q.index) {
      reduced.back().value += q.value;  // rank order: the same sum on every run
    } else {
      reduced.push_back(q);
    }
  }

  return reduced;
}

}  // namespace

std::vector<std::uint64_t> even_bounds(std::uint64_t n, int workers) {
  std::vector<std::uint64_t> b(std::size_t(workers) + 1);
  for (int r = 0; r <= workers; ++r) b[std::size_t(r)] = n * std::uint64_t(r) / std::uint64_t(workers);
  return b;
}

void check_bounds(std::span<const std::uint64_t> bounds, std::uint64_t n, int workers) {
  const bool ok = bounds.size() == std::size_t(workers) + 1 && bounds.front() == 0 && bounds.back() == n &&
                  std::is_sorted(bounds.begin(), bounds.end());
  if (!ok)
    throw Error("sparse all-reduce: region bounds that do not split [0, " + std::to_string(n) + ") into " +
                std::to_string(workers) + " regions");
}

std::vector<std::uint64_t> bounds_of(const Regions& regions, const std::string& name, std::uint64_t n, int workers) {
  const auto known = regions.find(name);
  return known != regions.end() ? known->second : even_bounds(n, workers);
}

void save_regions(StateWriter& w, const Regions& regions) {
  w.put<std::uint64_t>(regions.size());
  for (const auto& [name, bounds] : regions) {
    w.put_text(name);
    w.put_array<std::uint64_t>(bounds);
  }
}

Regions load_regions(StateReader& r) {
  Regions regions;
  for (auto count = r.get<std::uint64_t>(); count > 0; --count) {
    std::string name = r.get_text();
    auto bounds = r.get_array<std::uint64_t>();
    if (bounds.size() < 2 || bounds.front() != 0 || !std::is_sorted(bounds.begin(), bounds.end()))
      r.fail("holds sparse all-reduce regions of '" + name + "' that are not bounds from 0 up");
    regions[std::move(name)] = std::move(bounds);
  }
  return regions;
}

namespace {

// Balance: above `keep` pairs over all regions (`counts`, every region's), this worker's region
// keeps its share of them, its largest sums, in index order.
// How many sums region r keeps: all of them when the regions hold at most `keep` in all, else its
// share round(keep * count_r / total) (every worker computes every region's from the counts).
std::size_t quota_of(const std::vector<std::int64_t>& counts, int r, std::int64_t keep) {
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t(0));
  const auto count = std::size_t(counts[std::size_t(r)]);
  if (total <= keep) return count;
  return std::min(count, std::size_t(std::llround(double(keep) * double(counts[std::size_t(r)]) / double(total))));
}

void keep_quota(std::vector<Pair>& reduced, const std::vector<std::int64_t>& counts, int me, std::int64_t keep) {
  const std::size_t quota = quota_of(counts, me, keep);
  if (quota >= reduced.size()) return;
  std::nth_element(reduced.begin(), reduced.begin() + std::ptrdiff_t(quota), reduced.end(),
                   [](const Pair& a, const Pair& b) {
                     const float x = std::fabs(a.value), y = std::fabs(b.value);
                     return x != y ? x > y : a.index < b.index;
                   });
  reduced.resize(quota);
  std::sort(reduced.begin(), reduced.end(), [](const Pair& a, const Pair& b) { return a.index < b.index; });
}

// This worker's contribution to the update: its selected values at the update's indices (both
// ascend), what error feedback counts as sent.
Payload contribution(const Payload& sel, const std::vector<std::int32_t>& update, std::uint64_t n) {
  std::vector<Pair> own(sel.count());
  for (std::size_t j = 0; j < sel.count(); ++j) own[j] = {sel.indices[j], sel.values[j]};
  std::sort(own.begin(), own.end(), [](const Pair& a, const Pair& b) { return a.index < b.index; });
  Payload mine;
  mine.n = n;
  auto u = update.begin();
  for (const Pair& q : own) {
    u = std::lower_bound(u, update.end(), q.index);
    if (u == update.end()) break;
    if (*u == q.index) {
      mine.indices.push_back(q.index);
      mine.values.push_back(q.value);
    }
  }
  return mine;
}

}  // namespace

SparseAllreduceOutcome sparse_allreduce(Compressor& c, std::span<const float> acc, std::string_view tensor,
                                        std::span<const std::uint64_t> bounds, Collectives& comm,
                                        std::span<float> out) {
  SparseAllreduceOutcome r;
  const int w = comm.world_size(), me = comm.rank();
  const std::uint64_t n = acc.size();
  check_bounds(bounds, n, w);

  // 1. this worker's selection; a worker that met NaN or Inf sends none, and says so in step 3
  const Compressed selection = c.compress(acc, tensor);
  const bool bad = any_nonfinite(acc);
  Payload none;
  none.kind = PayloadKind::sparse;
  none.n = n;
  const Payload& sel = bad ? none : selection.payload;

  // 2. split and reduce: the pairs of region d to worker d; this region's sums in rank order
  std::vector<Pair> reduced = split_and_reduce(sel, bounds, comm, r.wire_bytes);

  // 3. balance: every region's count and, in the same all-reduce, how many workers met NaN or Inf
  // (any: the bucket is skipped everywhere); then each region keeps its share of
  // kSparseAllreduceKeep k, its largest sums
  std::vector<std::int64_t> counts(std::size_t(w) + 1, 0);
  counts[std::size_t(me)] = std::int64_t(reduced.size());
  counts[std::size_t(w)] = bad ? 1 : 0;
  comm.allreduce_sum(std::span<std::int64_t>(counts));
  r.wire_bytes += counts.size() * sizeof(std::int64_t);
  if (counts[std::size_t(w)] > 0) {
    r.skipped = true;
    return r;
  }
  counts.pop_back();
  const auto k = std::int64_t(std::max<double>(1.0, std::round(c.density() * double(n))));
  keep_quota(reduced, counts, me, kSparseAllreduceKeep * k);

  // 4. the kept sums to every worker: the update, the same everywhere (regions in index order);
  // every region's size is known from the counts, so the all-gather needs no round of sizes
  std::vector<std::byte> kept;
  put_pairs(kept, reduced);
  r.wire_bytes += kept.size();
  std::vector<std::uint64_t> sizes(std::size_t(w), 0);
  for (int s = 0; s < w; ++s) sizes[std::size_t(s)] = quota_of(counts, s, kSparseAllreduceKeep * k) * kPairBytes;
  const auto gathered = comm.allgather_known(kept, sizes);
  std::fill(out.begin(), out.end(), 0.0f);
  const float inv = 1.0f / float(w);
  std::vector<std::int32_t> update;
  for (int s = 0; s < w; ++s)
    for (const Pair& q : get_pairs(gathered[std::size_t(s)], s, "reduced region")) {
      if (q.index < 0 || std::uint64_t(q.index) < bounds[std::size_t(s)] ||
          std::uint64_t(q.index) >= bounds[std::size_t(s) + 1] || (!update.empty() && q.index <= update.back()))
        throw Error("sparse all-reduce: worker " + std::to_string(s) + " returned index " + std::to_string(q.index) +
                    " out of its region's order (do all workers run the same model and settings?)");
      out[std::size_t(q.index)] = q.value * inv;
      update.push_back(q.index);
    }

  r.mine = contribution(sel, update, n);

  // The next bounds: the update's indices in W equal counts (kept when too few to split).
  r.next_bounds.assign(bounds.begin(), bounds.end());
  const std::size_t f = update.size();
  if (f >= std::size_t(w)) {
    for (int d = 1; d < w; ++d)
      r.next_bounds[std::size_t(d)] = std::uint64_t(update[f * std::size_t(d) / std::size_t(w)]);
  }

  // The statistics count this worker's selection, as the all-gather's do (the density watch
  // compares it with the ratio); the update may hold up to kSparseAllreduceKeep times as many.
  r.info = selection.info;
  r.info.n = n;
  r.info.target_density = c.density();
  return r;
}

}  // namespace gs::compress::detail
