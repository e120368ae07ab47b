// The whole model streamed layer by layer equals the in-memory path: every pass of StreamedPasses
// against the CPU backend on the same values concatenated, the fitting report over both, and
// `analyze` with a memory budget that forces streaming against one that holds the model. Layers
// analysed in parallel store what one thread stores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/streamed.hpp"
#include "gs/kernels/cpu.hpp"
#include "common/temp_dir.hpp"

namespace gs::analyzer {
namespace {

using gs::testing::TempDir;

// Sums are merged per segment instead of per 64 Ki chunk: rounding only.
constexpr double kSumTolerance = 1e-12;

// Equal, or both NaN.
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void expect_close(double streamed, double memory, double rel, const std::string& what) {
  if (std::isnan(memory)) {
    EXPECT_TRUE(std::isnan(streamed)) << what;
    return;
  }
  EXPECT_NEAR(streamed, memory, rel * std::max(1e-300, std::fabs(memory))) << what;
}

// Heavy-tailed values with exact zeros, a NaN and an Inf, cut into segments of uneven sizes
// (one of a single value, one longer than the CPU backend's chunk).
struct Segmented final : SegmentSource {
  std::vector<float> all;
  std::vector<std::size_t> starts;
  explicit Segmented(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::gamma_distribution<double> gamma(0.7, 1e-3);
    const std::vector<std::size_t> sizes = {1000, 1, 70000, 65536, 3, 150001, 12345};
    for (std::size_t size : sizes) {
      starts.push_back(all.size());
      for (std::size_t i = 0; i < size; ++i) {
        float x = static_cast<float>(((rng() & 1) ? 1.0 : -1.0) * gamma(rng));
        if (rng() % 97 == 0) x = 0.0f;
        all.push_back(x);
      }
    }
    starts.push_back(all.size());
    all[5] = std::numeric_limits<float>::quiet_NaN();
    all[200000] = -std::numeric_limits<float>::infinity();
  }
  std::size_t count() const override { return starts.size() - 1; }
  std::uint64_t size(std::size_t s) const override { return starts[s + 1] - starts[s]; }
  std::span<const float> get(std::size_t s, std::vector<float>& scratch) const override {
    scratch.assign(all.begin() + static_cast<std::ptrdiff_t>(starts[s]),
                   all.begin() + static_cast<std::ptrdiff_t>(starts[s + 1]));
    return scratch;
  }
};

void expect_stats(const fitting::MagnitudeStats& s, const fitting::MagnitudeStats& m, const std::string& what) {
  EXPECT_EQ(s.count, m.count) << what;
  EXPECT_EQ(s.zeros, m.zeros) << what;
  EXPECT_EQ(s.nonfinite, m.nonfinite) << what;
  EXPECT_EQ(s.min, m.min) << what;
  EXPECT_EQ(s.max, m.max) << what;
  expect_close(s.sum, m.sum, kSumTolerance, what + " sum");
  expect_close(s.sum_sq, m.sum_sq, kSumTolerance, what + " sum_sq");
  expect_close(s.sum_log, m.sum_log, kSumTolerance, what + " sum_log");
  expect_close(s.sum_signed, m.sum_signed, 1e-9, what + " sum_signed");  // cancels: absolute
}

TEST(Streamed, EveryPassEqualsTheInMemoryOne) {
  const Segmented seg(11);
  StreamedPasses streamed(seg);
  kernels::cpu::CpuPasses memory(seg.all);
  ASSERT_EQ(streamed.size(), memory.size());
  expect_stats(streamed.stats(), memory.stats(), "stats");
  for (double t : {0.0, 1e-4, 2e-3}) {
    const std::string at = " above " + std::to_string(t);
    expect_stats(streamed.stats_above(t, t), memory.stats_above(t, t), "stats" + at);
    EXPECT_EQ(streamed.count_above(t), memory.count_above(t)) << at;
    const fitting::GpSums a = streamed.gp_sums(50.0, t, t), b = memory.gp_sums(50.0, t, t);
    EXPECT_EQ(a.count, b.count) << at;
    expect_close(a.sum_log1p, b.sum_log1p, kSumTolerance, "gp sum_log1p" + at);
    expect_close(a.sum_inv, b.sum_inv, kSumTolerance, "gp sum_inv" + at);
    expect_close(a.sum_inv2, b.sum_inv2, kSumTolerance, "gp sum_inv2" + at);
  }
  const std::uint64_t finite = memory.count_above(0.0) + memory.stats().zeros;
  for (std::uint64_t k : {std::uint64_t{1}, std::uint64_t{7}, finite / 1000, finite / 10, finite / 2, finite})
    EXPECT_EQ(streamed.kth_largest(k), memory.kth_largest(k)) << "k = " << k;
  EXPECT_THROW(streamed.kth_largest(finite + 1), Error);
  for (std::uint64_t points : {std::uint64_t{1000}, std::uint64_t{250000}, std::uint64_t{1} << 20}) {
    bool sub_s = false, sub_m = false;
    EXPECT_EQ(streamed.sorted_sample(points, 9, &sub_s), memory.sorted_sample(points, 9, &sub_m))
        << points << " points";
    EXPECT_EQ(sub_s, sub_m) << points << " points";
  }
  const auto rs = streamed.random_sample(5000, 3), rm = memory.random_sample(5000, 3);
  ASSERT_EQ(rs.size(), rm.size());
  for (std::size_t i = 0; i < rs.size(); ++i)
    ASSERT_TRUE(same(rs[i], rm[i])) << "draw " << i << ": " << rs[i] << " vs " << rm[i];
  for (auto [lines, length] : {std::pair<std::uint64_t, std::uint64_t>{64, 16}, {4096, 128}}) {
    const auto ss = streamed.spread_sample(lines, length), sm = memory.spread_sample(lines, length);
    ASSERT_EQ(ss.size(), sm.size());
    for (std::size_t i = 0; i < ss.size(); ++i) ASSERT_TRUE(same(ss[i], sm[i])) << lines << " lines, at " << i;
  }
}

TEST(Streamed, FitReportEqualsTheInMemoryOne) {
  const Segmented seg(12);
  StreamedPasses streamed(seg);
  kernels::cpu::CpuPasses memory(seg.all);
  fitting::FitReportOptions o;
  o.ks_max_points = 100000;  // a subsample: the same elements on both paths
  const fitting::FitReport a = fitting::fit_report(streamed, o), b = fitting::fit_report(memory, o);
  ASSERT_EQ(a.fits.size(), b.fits.size());
  for (std::size_t i = 0; i < a.fits.size(); ++i) {
    const auto& fa = a.fits[i];
    const auto& fb = b.fits[i];
    ASSERT_EQ(fa.error, fb.error) << fa.dist;
    for (std::size_t p = 0; p < fa.params.size(); ++p)
      expect_close(fa.params[p].second, fb.params[p].second, fa.dist == "gpareto" ? 1e-6 : 1e-8,
                   fa.dist + " " + fa.params[p].first);
    expect_close(fa.loglik, fb.loglik, 1e-9, fa.dist + " loglik");
    expect_close(fa.ks_D, fb.ks_D, 1e-6, fa.dist + " ks_D");
    expect_close(fa.ad_A2, fb.ad_A2, 1e-6, fa.dist + " ad_A2");
    EXPECT_EQ(fa.ks_n, fb.ks_n) << fa.dist;
  }
  ASSERT_EQ(a.thresholds.size(), b.thresholds.size());
  for (std::size_t i = 0; i < a.thresholds.size(); ++i) {
    const auto& ta = a.thresholds[i];
    const auto& tb = b.thresholds[i];
    const std::string what = ta.result.method + " at " + std::to_string(ta.result.density);
    ASSERT_EQ(ta.error, tb.error) << what;
    if (ta.result.method == "topk" || ta.result.method == "sidco-topk" || ta.result.method == "dgc") {
      EXPECT_EQ(ta.result.threshold, tb.result.threshold) << what;  // exact, or the same sample
      EXPECT_EQ(ta.result.selected, tb.result.selected) << what;
    } else {
      expect_close(ta.result.threshold, tb.result.threshold, 1e-8, what);
      EXPECT_NEAR(double(ta.result.selected), double(tb.result.selected), 2.0) << what;
    }
  }
}

// A snapshot of about 2 MiB of gradients, so a 1 MiB budget streams the whole model.
void write_big_snapshot(const std::filesystem::path& path) {
  const Segmented seg(13);
  data::SnapshotMeta meta;
  meta.model = "segments";
  meta.created = "2026-01-02T03:04:05Z";
  std::vector<data::LayerInfo> layers;
  for (std::size_t s = 0; s < seg.count(); ++s)
    layers.push_back({"layer" + std::to_string(s) + ".weight", {static_cast<std::int64_t>(seg.size(s))}});
  data::SnapshotWriter w(path, meta, layers);
  for (std::int64_t step = 0; step < 2; ++step) {
    // Step 10 holds each layer's values reversed.
    std::vector<std::vector<float>> values;
    std::vector<std::span<const float>> spans;
    for (std::size_t s = 0; s < seg.count(); ++s) {
      values.emplace_back(seg.all.begin() + static_cast<std::ptrdiff_t>(seg.starts[s]),
                          seg.all.begin() + static_cast<std::ptrdiff_t>(seg.starts[s + 1]));
      if (step == 1) std::reverse(values.back().begin(), values.back().end());
    }
    for (const auto& v : values) spans.emplace_back(v);
    w.append({step * 10, 1.0, 0.1}, spans);
  }
  w.close();
}

AnalyzeConfig big_config(const TempDir& dir, const std::string& out) {
  AnalyzeConfig c;
  c.input = dir / "big.h5";
  c.output = dir / out;
  c.backend = "cpu";
  c.ks_max_points = 50000;
  c.quiet = true;
  return c;
}

TEST(Streamed, AnalyzeStreamedEqualsInMemoryAndThreadsChangeNothing) {
  TempDir dir;
  write_big_snapshot(dir / "big.h5");
  AnalyzeConfig memory = big_config(dir, "memory.h5");
  memory.jobs = 1;
  AnalyzeConfig streamed = big_config(dir, "streamed.h5");
  streamed.memory_mib = 1;  // below the first layer: every layer is read again at each pass
  streamed.jobs = 1;
  AnalyzeConfig parallel = big_config(dir, "parallel.h5");
  parallel.jobs = 2;
  analyze(memory);
  analyze(streamed);
  analyze(parallel);
  const AnalysisReader m(memory.output), s(streamed.output), p(parallel.output);

  const auto mf = m.fits(), sf = s.fits(), pf = p.fits();
  ASSERT_EQ(mf.size(), sf.size());
  ASSERT_EQ(mf.size(), pf.size());
  for (std::size_t i = 0; i < mf.size(); ++i) {
    const std::string what = mf[i].scope + " " + mf[i].dist;
    ASSERT_EQ(sf[i].scope, mf[i].scope);
    EXPECT_EQ(sf[i].error, mf[i].error) << what;
    // The generalized Pareto's Newton iteration stops at a step of 1e-10 theta: 1e-6 on xi.
    const double rel = mf[i].dist == "gpareto" ? 1e-6 : 1e-8;
    expect_close(sf[i].param1, mf[i].param1, rel, what + " param1");
    expect_close(sf[i].param2, mf[i].param2, rel, what + " param2");
    expect_close(sf[i].ks_D, mf[i].ks_D, 1e-6, what + " ks_D");
    EXPECT_EQ(sf[i].ks_n, mf[i].ks_n) << what;
    // Layers in parallel: the same numbers, bit for bit, in the same order.
    EXPECT_EQ(pf[i].scope, mf[i].scope);
    EXPECT_EQ(pf[i].dist, mf[i].dist);
    EXPECT_TRUE(same(pf[i].param1, mf[i].param1)) << what;
    EXPECT_TRUE(same(pf[i].ks_D, mf[i].ks_D)) << what;
  }
  const auto mt = m.thresholds(), st = s.thresholds(), pt = p.thresholds();
  ASSERT_EQ(mt.size(), st.size());
  ASSERT_EQ(mt.size(), pt.size());
  for (std::size_t i = 0; i < mt.size(); ++i) {
    const std::string what = mt[i].scope + " " + mt[i].method + " " + std::to_string(mt[i].density);
    EXPECT_EQ(st[i].exact_threshold, mt[i].exact_threshold) << what;  // exact top-k: bit for bit
    expect_close(st[i].threshold, mt[i].threshold, 1e-8, what);
    EXPECT_EQ(pt[i].method, mt[i].method);
    EXPECT_TRUE(same(pt[i].threshold, mt[i].threshold)) << what;
    EXPECT_EQ(pt[i].selected, mt[i].selected) << what;
  }
}

}  // namespace
}  // namespace gs::analyzer
