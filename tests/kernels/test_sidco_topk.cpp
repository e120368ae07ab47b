// sidco-topk on every backend (through its Selector: cpu, cuda, cuda-host): the selection equals
// exact top-k (the plain oracle: stable sort by magnitude, ties to lower indices) at every shape,
// size and density of the harness, the fallback reads happen when data are built to fool the
// sample, and the fitting report's sidco_topk_threshold agrees. Tolerance: none; indices and
// values must match exactly.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/naive_passes.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/select.hpp"
#include "harness.hpp"

namespace gs::testing {
namespace {

namespace cpu = gs::kernels::cpu;

// The min(k, finite) largest finite |g|, ties to lower indices, in index order.
Picked oracle(std::span<const float> g, double density) {
  std::vector<std::int64_t> order;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (std::isfinite(g[i])) order.push_back(std::int64_t(i));
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  order.resize(std::min<std::size_t>(order.size(), gs::fitting::target_count(g.size(), density)));
  std::sort(order.begin(), order.end());
  Picked p;
  p.indices = order;
  for (auto i : order) p.values.push_back(g[std::size_t(i)]);
  return p;
}

void expect_picked(const cpu::Selection<std::int32_t>& got, const Picked& want) {
  ASSERT_EQ(got.indices.size(), want.indices.size());
  EXPECT_TRUE(std::equal(got.indices.begin(), got.indices.end(), want.indices.begin()));
  EXPECT_EQ(0, std::memcmp(got.values.data(), want.values.data(), want.values.size() * sizeof(float)));
}

class SidcoTopk : public BackendTest {};

TEST_P(SidcoTopk, SelectsExactlyWhatTopkSelects) {
  std::uint64_t seed = 4000;
  const auto selector = gs::kernels::make_selector(kind());  // reused across calls, as a compressor does
  for (Shape s : {Shape::laplace, Shape::student3, Shape::pareto, Shape::ties, Shape::specials, Shape::uniform})
    for (std::size_t n : {0, 1, 31, 1000, 65536, 131075, 1000007}) {
      if (n == 1000007 && s != Shape::specials && s != Shape::ties) continue;
      const auto g = make_data(s, n, ++seed);
      for (double density : {1.0, 0.1, 0.01, 0.001}) {
        SCOPED_TRACE(std::string(shape_name(s)) + " n=" + std::to_string(n) + " density=" + std::to_string(density));
        cpu::Selection<std::int32_t> got;
        const auto r = selector->sidco_topk(selector->place(g), n, density, 2, got);
        const Picked want = oracle(g, density);
        expect_picked(got, want);
        EXPECT_EQ(r.selected, want.indices.size());
        if (!want.values.empty()) {
          float kth = INFINITY;
          for (float v : want.values) kth = std::min(kth, std::fabs(v));
          EXPECT_EQ(r.threshold, double(kth));  // the k-th largest |g|
        }
        EXPECT_GE(r.full_reads, n ? 1 : 0);
        EXPECT_LE(r.full_reads, 3);
        const auto nonfinite = std::count_if(g.begin(), g.end(), [](float v) { return !std::isfinite(v); });
        EXPECT_EQ(r.nonfinite, std::uint64_t(nonfinite));
      }
    }
}

// Every run of the spread sample holds a huge value and nothing else does: the sample puts the
// bound above everything outside it, so the first read finds fewer than k candidates, and so does
// the second (the sample's value at four times the count); the third packs every finite value.
TEST_P(SidcoTopk, FallsBackWhenTheSampleFoolsTheBound) {
  const std::size_t n = std::size_t{1} << 21;
  auto g = make_data(Shape::laplace, n, 77);
  const auto lines = gs::fitting::SidcoTopkBound::sample_lines(n), len = gs::fitting::SidcoTopkBound::kLineLength;
  for (std::uint64_t l = 0; l < lines; ++l)
    for (std::uint64_t j = 0; j < len; ++j) g[gs::fitting::spread_line_start(n, lines, len, l) + j] = 100.0f + float(j);
  const double density = 0.05;  // k = 104857 > the 32768 sampled values
  cpu::Selection<std::int32_t> got;
  const auto selector = gs::kernels::make_selector(kind());
  const auto r = selector->sidco_topk(selector->place(g), n, density, 2, got);
  expect_picked(got, oracle(g, density));
  EXPECT_EQ(r.full_reads, 3);
  EXPECT_LT(r.candidates, gs::fitting::target_count(n, density));  // the first read's shortfall

  NaivePasses passes(g);  // the fitting report's form of the method: the same plan, the same reads
  const auto t = gs::fitting::sidco_topk_threshold(passes, density, 2);
  EXPECT_EQ(t.stages, 3);
  EXPECT_EQ(t.threshold, r.threshold);
  EXPECT_EQ(t.selected, r.selected);
}

// The rule as select() makes it (Rule::sidco_topk: on a device every decision there, the bound
// from the sample included, and the selection left there until fetch()): topk's set, its k-th
// |g| as the threshold, the non-finite counted, the stages its sidco_topk() reports.
TEST_P(SidcoTopk, SelectMakesTopksSelection) {
  std::uint64_t seed = 5000;
  const auto selector = gs::kernels::make_selector(kind());
  const auto host = gs::kernels::make_selector(gs::kernels::BackendKind::cpu);
  for (Shape s : {Shape::laplace, Shape::student3, Shape::pareto, Shape::ties, Shape::specials, Shape::uniform})
    for (std::size_t n : {0, 1, 31, 1000, 65536, 131075, 1000007}) {
      if (n == 1000007 && s != Shape::specials && s != Shape::laplace) continue;
      const auto g = make_data(s, n, ++seed);
      for (double density : {0.1, 0.01, 0.001}) {
        SCOPED_TRACE(std::string(shape_name(s)) + " n=" + std::to_string(n) + " density=" + std::to_string(density));
        gs::kernels::SelectRequest r;
        r.rule = gs::kernels::SelectRequest::Rule::sidco_topk;
        r.density = density;
        r.stages = 2;
        cpu::Selection<std::int32_t> got, bounded;
        selector->select(selector->place(g), n, r);
        const gs::kernels::SelectionReport rep = selector->fetch(got);
        const Picked want = oracle(g, density);
        expect_picked(got, want);
        EXPECT_EQ(rep.count, want.indices.size());
        EXPECT_EQ(rep.exact, 1);
        const auto nonfinite = std::count_if(g.begin(), g.end(), [](float v) { return !std::isfinite(v); });
        EXPECT_EQ(rep.nonfinite, std::uint64_t(nonfinite));
        const auto b = host->sidco_topk(g.data(), n, density, 2, bounded);
        EXPECT_EQ(rep.threshold, b.threshold);
        EXPECT_EQ(rep.stages, b.stages) << "SIDCo-E's stages on the sample, as the host's plan fits them";
        if (n > 100000 && s == Shape::laplace) {
          EXPECT_EQ(rep.corrected, 0) << "the bound holds: the exact top-k among its candidates alone";
        }
      }
    }
}

// The sample fooled (as above) and candidates past their room: select() takes g's own exact
// top-k, the same set.
TEST_P(SidcoTopk, SelectFallsBackToGsOwnTopk) {
  const std::size_t n = std::size_t{1} << 21;
  auto fooled = make_data(Shape::laplace, n, 77);
  const auto lines = gs::fitting::SidcoTopkBound::sample_lines(n), len = gs::fitting::SidcoTopkBound::kLineLength;
  for (std::uint64_t l = 0; l < lines; ++l)
    for (std::uint64_t j = 0; j < len; ++j)
      fooled[gs::fitting::spread_line_start(n, lines, len, l) + j] = 100.0f + float(j);
  // Every value in the sample is small and the rest large: the bound leaves nearly all of g above it.
  auto overflow = make_data(Shape::laplace, n, 78);
  for (auto& v : overflow) v = 10.0f + std::fabs(v);
  for (std::uint64_t l = 0; l < lines; ++l)
    for (std::uint64_t j = 0; j < len; ++j) overflow[gs::fitting::spread_line_start(n, lines, len, l) + j] = 1e-3f;
  const auto selector = gs::kernels::make_selector(kind());
  for (const auto* g : {&fooled, &overflow})
    for (double density : {0.05, 0.001}) {
      SCOPED_TRACE(std::string(g == &fooled ? "fooled" : "overflow") + " " + std::to_string(density));
      gs::kernels::SelectRequest r;
      r.rule = gs::kernels::SelectRequest::Rule::sidco_topk;
      r.density = density;
      r.stages = 2;
      cpu::Selection<std::int32_t> got;
      selector->select(selector->place(*g), n, r);
      const gs::kernels::SelectionReport rep = selector->fetch(got);
      expect_picked(got, oracle(*g, density));
      // More of g read: on the fooled sample everywhere; past the candidates' room on a device
      // (the host packs every candidate).
      if (g == &fooled || kind() != gs::kernels::BackendKind::cpu) {
        EXPECT_EQ(rep.corrected, 1);
      }
    }
  gs::kernels::SelectRequest bad;
  bad.rule = gs::kernels::SelectRequest::Rule::sidco_topk;
  bad.density = 0.01;
  bad.stages = 0;
  EXPECT_THROW(selector->select(selector->place(fooled), n, bad), gs::Error);
}

GS_INSTANTIATE_FOR_BACKENDS(SidcoTopk);

TEST(SidcoTopkReport, FittingReportMatchesExactTopk) {
  for (Shape s : {Shape::laplace, Shape::pareto, Shape::ties, Shape::specials}) {
    const auto g = make_data(s, 300000, 12);
    NaivePasses passes(g);
    for (double density : {0.1, 0.01, 0.001}) {
      SCOPED_TRACE(std::string(shape_name(s)) + " " + std::to_string(density));
      const auto want = gs::fitting::topk_threshold(passes, density);
      const auto got = gs::fitting::sidco_topk_threshold(passes, density, 2);
      EXPECT_EQ(got.method, "sidco-topk");
      EXPECT_EQ(got.threshold, want.threshold);
      EXPECT_EQ(got.selected, want.selected);
      EXPECT_EQ(got.quality, want.quality);
      EXPECT_EQ(got.stages, 1);  // no fallback on these
    }
  }
  // Too few finite values for k: refused, as exact top-k refuses.
  std::vector<float> mostly_nan(1000, std::nanf(""));
  mostly_nan[3] = 1.0f;
  NaivePasses few(mostly_nan);
  EXPECT_THROW(gs::fitting::sidco_topk_threshold(few, 0.01, 2), gs::Error);
  EXPECT_THROW(gs::fitting::SidcoTopkBound(10, 0.0, 2), gs::Error);
  EXPECT_THROW(gs::fitting::SidcoTopkBound(10, 0.1, 0), gs::Error);
}

}  // namespace
}  // namespace gs::testing
