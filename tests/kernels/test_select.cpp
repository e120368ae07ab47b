// Compaction, exact top-k and log histograms of every backend (cpu, cuda, cuda-host) against plain
// reference loops, with poisoned guard regions around every output (checked inside the harness).
// Tolerance: none; order and contents must match exactly (CUDA histograms: see below).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"
#include "harness.hpp"

namespace gs::testing {
namespace {

bool above(float g, double t) {
  const double x = std::fabs(double(g));
  return std::isfinite(x) && x > t;
}

Picked reference_compact(std::span<const float> g, double t) {
  Picked p;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (above(g[i], t)) {
      p.indices.push_back(std::int64_t(i));
      p.values.push_back(g[i]);
    }
  return p;
}

// The k largest finite |g|, ties broken towards lower indices, returned in index order.
Picked reference_topk(std::span<const float> g, std::uint64_t k) {
  std::vector<std::int64_t> order;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (std::isfinite(g[i])) order.push_back(std::int64_t(i));
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  Picked p;
  p.indices = order;
  for (auto i : order) p.values.push_back(g[i]);
  return p;
}

void expect_same(const Picked& got, const Picked& ref) {
  ASSERT_EQ(got.indices.size(), ref.indices.size());
  EXPECT_EQ(got.indices, ref.indices);
  ASSERT_EQ(got.values.size(), ref.values.size());
  for (std::size_t i = 0; i < ref.values.size(); ++i) {
    if (std::memcmp(&got.values[i], &ref.values[i], sizeof(float)) != 0) {
      ADD_FAILURE() << "value " << i << ": " << got.values[i] << " vs " << ref.values[i];
      break;
    }
  }
}

const std::vector<std::size_t> kSizes{0, 1, 31, 1000, 65536, 131075, 1000007};
const std::vector<Shape> kShapes{Shape::laplace, Shape::student3, Shape::ties, Shape::specials, Shape::uniform};

class Compaction : public BackendTest {};
class TopK : public BackendTest {};
class LogHistogram : public BackendTest {};

TEST_P(Compaction, MatchesReferenceExactly) {
  std::uint64_t seed = 500;
  const auto ops = make_ops(kind());
  for (Shape s : kShapes)
    for (std::size_t n : kSizes) {
      if (n == 1000007 && s != Shape::specials && s != Shape::ties) continue;
      const auto g = make_data(s, n, ++seed);
      std::vector<double> mags;
      for (float v : g)
        if (std::isfinite(v)) mags.push_back(std::fabs(double(v)));
      std::sort(mags.begin(), mags.end());
      std::vector<double> ts{0.0};
      for (double q : {0.5, 0.9, 0.999})
        if (!mags.empty()) ts.push_back(mags[std::size_t(q * double(mags.size() - 1))]);
      for (double t : ts) {
        SCOPED_TRACE(ops->name() + " " + shape_name(s) + " n=" + std::to_string(n) + " t=" + std::to_string(t));
        const Picked ref = reference_compact(g, t);
        expect_same(ops->compact(g, t, n, false), ref);                  // capacity n
        expect_same(ops->compact(g, t, ref.indices.size(), true), ref);  // exact capacity
      }
    }
}

TEST_P(Compaction, TooSmallBufferThrowsWithoutWriting) {
  const auto g = make_data(Shape::laplace, 5000, 42);
  const std::uint64_t need = reference_compact(g, 1e-4).indices.size();
  ASSERT_GT(need, 10u);
  const auto ops = make_ops(kind());
  EXPECT_THROW(ops->compact(g, 1e-4, need - 1, false), gs::Error);
  EXPECT_THROW(ops->compact(g, 1e-4, need - 1, true), gs::Error);
  EXPECT_THROW(ops->compact(g, std::nan(""), need, true), gs::Error);
}

TEST(CpuCompaction, TooSmallBufferLeavesTheCallersBuffer) {
  const auto g = make_data(Shape::laplace, 5000, 42);
  const std::uint64_t need = reference_compact(g, 1e-4).indices.size();
  // On the CPU the caller's buffer is untouched when it throws.
  std::vector<std::int32_t> idx(need - 1, -5);
  std::vector<float> val(need - 1, 2.0f);
  EXPECT_THROW(gs::kernels::cpu::compact_above(g, 1e-4, std::span(idx), std::span(val)), gs::Error);
  EXPECT_TRUE(std::all_of(idx.begin(), idx.end(), [](auto v) { return v == -5; }));
  EXPECT_THROW(gs::kernels::cpu::compact_above(g, std::nan(""), std::span(idx), std::span(val)), gs::Error);
}

TEST(CpuCompaction, Int32IndicesRefuseHugeInputs) {
  // 2^31 + 1 elements cannot be addressed by int32: refused before any element is read.
  const float one = 1.0f;
  const std::span<const float> huge(&one, (std::size_t{1} << 31) + 1);
  std::vector<std::int32_t> idx(1);
  EXPECT_THROW(gs::kernels::cpu::compact_above(huge, 0.5, std::span(idx), std::span<float>()), gs::Error);
  EXPECT_THROW(gs::kernels::cpu::topk(huge, 1, std::span(idx), std::span<float>()), gs::Error);
}

TEST(CpuCompaction, SelectionHelpersAndSkippedValues) {
  const auto g = make_data(Shape::specials, 20000, 9);
  const Picked ref = reference_compact(g, 2e-3);
  const auto s32 = gs::kernels::cpu::select_above(g, 2e-3);
  const auto s64 = gs::kernels::cpu::select_above64(g, 2e-3);
  EXPECT_EQ(std::vector<std::int64_t>(s32.indices.begin(), s32.indices.end()), ref.indices);
  EXPECT_EQ(s64.indices, ref.indices);
  std::vector<std::int64_t> idx(ref.indices.size());
  EXPECT_EQ(gs::kernels::cpu::compact_above(g, 2e-3, std::span(idx), std::span<float>()), ref.indices.size());
  EXPECT_EQ(idx, ref.indices);
}

TEST_P(TopK, ExactlyKLargestWithLowIndexTies) {
  std::uint64_t seed = 900;
  const auto ops = make_ops(kind());
  for (Shape s : kShapes)
    for (std::size_t n : kSizes) {
      if (n == 0) continue;
      if (n == 1000007 && s != Shape::ties && s != Shape::student3) continue;
      const auto g = make_data(s, n, ++seed);
      const std::uint64_t finite = std::count_if(g.begin(), g.end(), [](float v) { return std::isfinite(v); });
      for (std::uint64_t k : {std::uint64_t{1}, finite / 1000 + 1, finite / 10, finite / 2, finite}) {
        if (k == 0 || k > finite) continue;
        SCOPED_TRACE(ops->name() + " " + shape_name(s) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        const Picked ref = reference_topk(g, k);
        expect_same(ops->topk(g, k, false), ref);
        expect_same(ops->topk(g, k, true), ref);
      }
    }
}

TEST_P(TopK, BadArguments) {
  const auto g = make_data(Shape::specials, 1000, 4);
  const std::uint64_t finite = std::count_if(g.begin(), g.end(), [](float v) { return std::isfinite(v); });
  const auto ops = make_ops(kind());
  EXPECT_THROW(ops->topk(g, finite + 1, false), gs::Error);
  EXPECT_TRUE(ops->topk(g, 0, true).indices.empty());
}

TEST(CpuTopK, BuffersSmallerThanK) {
  const auto g = make_data(Shape::specials, 1000, 4);
  std::vector<std::int32_t> idx(3);
  EXPECT_THROW(gs::kernels::cpu::topk(g, 4, std::span(idx), std::span<float>()), gs::Error);
}

TEST_P(LogHistogram, MatchesReferenceBins) {
  std::uint64_t seed = 300;
  const auto ops = make_ops(kind());
  for (Shape s : {Shape::laplace, Shape::pareto, Shape::specials})
    for (std::size_t n : {std::size_t{0}, std::size_t{31}, std::size_t{200003}}) {
      const auto g = make_data(s, n, ++seed);
      const double lo = 1e-6, hi = 1e-1;
      const int bins = 97;
      gs::kernels::LogHistogram ref;
      ref.counts.assign(bins, 0);
      const double lw = bins / std::log(hi / lo);
      for (float v : g) {
        const double x = std::fabs(double(v));
        if (!std::isfinite(x))
          ++ref.nonfinite;
        else if (x == 0)
          ++ref.zeros;
        else if (x < lo)
          ++ref.below;
        else if (x >= hi)
          ++ref.above;
        else
          ++ref.counts[std::min<std::size_t>(bins - 1, std::size_t((std::log(x) - std::log(lo)) * lw))];
      }
      SCOPED_TRACE(ops->name() + " " + shape_name(s) + " n=" + std::to_string(n));
      const auto h = ops->histogram(g, lo, hi, bins);
      EXPECT_EQ(h.zeros, ref.zeros);
      EXPECT_EQ(h.nonfinite, ref.nonfinite);
      EXPECT_EQ(h.below, ref.below);
      EXPECT_EQ(h.above, ref.above);
      ASSERT_EQ(h.counts.size(), std::size_t(bins));
      // On the host (cpu, cuda-host): exact. CUDA's log may differ from the host's by an ulp,
      // which moves an element sitting on a bin edge: at most 1 in 10^5 may change bins (total
      // is exact above).
      std::uint64_t moved = 0;
      for (int b = 0; b < bins; ++b)
        moved += std::uint64_t(std::llabs(std::int64_t(h.counts[b]) - std::int64_t(ref.counts[b])));
      if (kind() != gs::kernels::BackendKind::cuda)
        EXPECT_EQ(moved, 0u);
      else
        EXPECT_LE(moved, 2 * (n / 100000 + 1));
      EXPECT_DOUBLE_EQ(h.edge(0), lo);
      EXPECT_NEAR(h.edge(bins), hi, 1e-12 * hi);
    }
  EXPECT_THROW(ops->histogram({}, 0.0, 1.0, 10), gs::Error);
  EXPECT_THROW(ops->histogram({}, 1.0, 1.0, 10), gs::Error);
  EXPECT_THROW(ops->histogram({}, 1e-3, 1.0, 0), gs::Error);
}

// The Selector (what compressors select through) on each backend: the vector placed in the
// backend's memory once, every selection against the references.
class Selector : public BackendTest {};

// Selections denser than a block keeps in shared memory (kernels::portable::kSelectStaged hits a
// block): each such block reads its chunk again to write them, in order. 5,000,011 elements give a
// 132-SM GPU's 1056 blocks chunks of 4,735 and cuda-host's 16 blocks chunks of 312,501.
TEST_P(Selector, SelectionsDenserThanABlockKeepsStayInOrder) {
  const auto sel = gs::kernels::make_selector(kind());
  const auto g = make_data(Shape::specials, 5000011, 4242);
  const float* d = sel->place(g);
  gs::kernels::Selection<std::int32_t> out;
  for (double t : {-1.0, 0.0}) {
    sel->above(d, g.size(), t, out);
    const Picked ref = reference_compact(g, t);
    EXPECT_EQ(std::vector<std::int64_t>(out.indices.begin(), out.indices.end()), ref.indices) << t;
    EXPECT_EQ(0, std::memcmp(out.values.data(), ref.values.data(), ref.values.size() * sizeof(float))) << t;
  }
  const std::uint64_t k = g.size() / 2;
  sel->topk(d, g.size(), k, out);
  EXPECT_EQ(std::vector<std::int64_t>(out.indices.begin(), out.indices.end()), reference_topk(g, k).indices);
}

TEST_P(Selector, PlacesOnceAndSelectsAsTheReferences) {
  const auto sel = gs::kernels::make_selector(kind());
  EXPECT_EQ(sel->kind(), kind());
  std::uint64_t seed = 7000;
  // centre_taps: SIDCo's stage 1 keeps every non-zero value and its tail stages go on from them.
  for (Shape s : {Shape::laplace, Shape::ties, Shape::specials, Shape::centre_taps})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{200003}}) {
      const auto g = make_data(s, n, ++seed);
      SCOPED_TRACE(std::string(shape_name(s)) + " n=" + std::to_string(n));
      const float* d = sel->place(g);
      const std::uint64_t finite = std::count_if(g.begin(), g.end(), [](float v) { return std::isfinite(v); });
      EXPECT_EQ(sel->nonfinite(d, n), n - finite);
      gs::kernels::Selection<std::int32_t> out;
      for (double t : {-1.0, 0.0, 1e-3}) {
        sel->above(d, n, t, out);
        const Picked ref = reference_compact(g, t);
        EXPECT_EQ(std::vector<std::int64_t>(out.indices.begin(), out.indices.end()), ref.indices);
        EXPECT_EQ(0, std::memcmp(out.values.data(), ref.values.data(), ref.values.size() * sizeof(float)));
      }
      for (std::uint64_t k : {std::uint64_t{1}, n / 100 + 1, n + 5}) {  // k beyond the finite count: all
        sel->topk(d, n, k, out);
        const Picked ref = reference_topk(g, std::min(k, finite));
        EXPECT_EQ(std::vector<std::int64_t>(out.indices.begin(), out.indices.end()), ref.indices) << k;
      }
      if (n >= 1000) {
        const auto r =
            sel->sidco(d, n, 0.01, gs::fitting::SidcoVariant::exponential, 2, gs::fitting::SidcoRule::published(), out);
        EXPECT_EQ(r.selected, out.indices.size());
        EXPECT_EQ(r.nonfinite, n - finite);                    // every backend counts them (the compressors report it)
        const Picked ref = reference_compact(g, r.threshold);  // exactly what is above its threshold
        EXPECT_EQ(std::vector<std::int64_t>(out.indices.begin(), out.indices.end()), ref.indices);
        EXPECT_GE(r.stages, s == Shape::centre_taps ? 2 : 1);
        // The same threshold as the CPU's pipeline, up to the rounding of its float-block sums
        // (relative error at most 8 * 2^-24, gs/fitting/passes.hpp).
        gs::kernels::cpu::Selection<std::int32_t> cpu_out;
        const auto c = gs::kernels::cpu::sidco_select(g, 0.01, gs::fitting::SidcoVariant::exponential, 2,
                                                      gs::fitting::SidcoRule::published(), cpu_out);
        EXPECT_NEAR(r.threshold, c.threshold, 1e-6 * c.threshold);
        // With the count correction, the rule the CPU's pipeline follows: inside the band the
        // selection stands, above it the one at the threshold stepped up on its excess (or g's
        // exact top-k), below it the one at the corrected threshold.
        for (const double density : {0.01, 0.001}) {
          const auto rc =
              sel->sidco(d, n, density, gs::fitting::SidcoVariant::exponential, 2, gs::fitting::SidcoRule{}, out);
          gs::kernels::cpu::Selection<std::int32_t> cpu_corrected;
          const auto cc = gs::kernels::cpu::sidco_select(g, density, gs::fitting::SidcoVariant::exponential, 2,
                                                         gs::fitting::SidcoRule{}, cpu_corrected);
          EXPECT_EQ(rc.corrected, cc.corrected) << density;
          EXPECT_NEAR(double(out.indices.size()), double(cpu_corrected.indices.size()),
                      2.0 + 1e-5 * double(cpu_corrected.indices.size()))
              << density;
          EXPECT_EQ(rc.selected, out.indices.size());
        }
      }
    }
}

GS_INSTANTIATE_FOR_BACKENDS(Selector);
GS_INSTANTIATE_FOR_BACKENDS(Compaction);
GS_INSTANTIATE_FOR_BACKENDS(TopK);
GS_INSTANTIATE_FOR_BACKENDS(LogHistogram);

// A device selection queues g's exact top-k whatever its decisions (nothing comes back to choose),
// but its radix histograms and its selection read g only where the decisions chose it: their gate
// is the state's mode, read on the device. On cuda-host, which counts what the device reads:
// SIDCo-E on Laplace data (its estimate holds) passes over g 3 times (its two stages, and the
// selection above the estimate, which is also the count correction's count), the exact top-k 5
// times (the finite count, three digits, the selection of the keys above the k-th and its ties).
TEST(CudaHostSelect, AnExactTopkNotChosenReadsNothing) {
  const auto g = make_data(Shape::laplace, 200000, 77);
  const auto selector = gs::kernels::make_selector(gs::kernels::BackendKind::cuda_host);
  const float* d = selector->place(g);
  const auto passes = [&](const gs::kernels::SelectRequest& r, std::uint64_t* launches, int* exact) {
    selector->select(d, g.size(), r);  // the workspace made and sized first
    const gs::kernels::DeviceWork w0 = gs::kernels::device_work();
    selector->select(d, g.size(), r);
    const gs::kernels::DeviceWork w = gs::kernels::device_work() - w0;
    gs::kernels::Selection<std::int32_t> out;
    *exact = selector->fetch(out).exact;
    *launches = w.launches;
    return double(w.elements_passed) / double(g.size());
  };
  gs::kernels::SelectRequest sidco;
  sidco.rule = gs::kernels::SelectRequest::Rule::sidco;
  sidco.density = 0.01;
  sidco.stages = 2;
  sidco.sidco.correct = true;
  gs::kernels::SelectRequest topk;
  topk.rule = gs::kernels::SelectRequest::Rule::topk;
  topk.k = 2000;
  std::uint64_t sidco_launches = 0, topk_launches = 0;
  int sidco_exact = -1, topk_exact = -1;
  EXPECT_NEAR(passes(sidco, &sidco_launches, &sidco_exact), 3.0, 0.01);
  EXPECT_EQ(sidco_exact, 0) << "SIDCo-E's estimate held: no exact top-k";
  EXPECT_NEAR(passes(topk, &topk_launches, &topk_exact), 5.0, 0.01);
  EXPECT_EQ(topk_exact, 1);
  EXPECT_EQ(sidco_launches, 8u) << "2 stage launches (the first sets the state), the selection above the estimate "
                                   "with the correction's decision, the selection at a corrected threshold (gated), "
                                   "the top-k's 3 histograms and its selection with the report";
  EXPECT_EQ(topk_launches, 5u) << "the finite count, 3 histograms, the selection with the report";
}

}  // namespace
}  // namespace gs::testing
