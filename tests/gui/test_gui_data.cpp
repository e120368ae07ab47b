// The GUI's computations without widgets: the histogram against kernels' histogram, the density
// curves against fitting's pdf of fit_report's parameters, and both over-training sources against
// fit_report and the analysis file they read.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "common/device_faults.hpp"
#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/plots/vector_view.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gui/gui_fixtures.hpp"
#include "training_source.hpp"

namespace gs::gui {
namespace {

using testing::TempDir;
using testing::write_snapshot;

TEST(GuiVectorView, HistogramMatchesKernelsAndDensitiesMatchFitReport) {
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 1, 11);
  const std::vector<float>& g = models[0];
  ViewOptions options;
  options.bins = 60;
  const VectorView view = analyse_vector(g, kModelScope, 0, options);

  // The range runs from the smallest non-zero |g| to just above the largest.
  double lo = INFINITY, hi = 0.0;
  std::uint64_t nonzero = 0;
  for (float v : g)
    if (v != 0.0f) {
      lo = std::min(lo, double(std::fabs(v)));
      hi = std::max(hi, double(std::fabs(v)));
      ++nonzero;
    }
  EXPECT_EQ(view.histogram.lo, lo);
  EXPECT_NEAR(view.histogram.hi, hi, 1e-8 * hi);
  EXPECT_EQ(view.finite_nonzero, nonzero);
  const auto direct = kernels::cpu::log_histogram(g, view.histogram.lo, view.histogram.hi, 60);
  ASSERT_EQ(direct.counts, view.histogram.counts);
  EXPECT_EQ(direct.above, 0u);
  EXPECT_EQ(direct.below, 0u);
  std::size_t k = 0;
  for (std::size_t i = 0; i < direct.counts.size(); ++i) {
    if (direct.counts[i] == 0) continue;
    ASSERT_LT(k, view.bin_center.size());
    const double a = direct.edge(i), b = direct.edge(i + 1);
    EXPECT_NEAR(view.bin_center[k], std::sqrt(a * b), 1e-12 * b);
    // density * n * width gives the count back (relative 1e-12).
    EXPECT_NEAR(view.bin_density[k] * double(nonzero) * (b - a), double(direct.counts[i]),
                1e-9 * double(direct.counts[i]));
    ++k;
  }
  EXPECT_EQ(k, view.bin_center.size());

  kernels::cpu::CpuPasses passes(g);
  const fitting::FitReport report = fitting::fit_report(passes, options.report);
  ASSERT_EQ(view.curves.size(), report.fits.size());
  for (const auto& curve : view.curves) {
    const fitting::DistFit* fit = find_fit(report, curve.dist);
    ASSERT_NE(fit, nullptr);
    ASSERT_TRUE(fit->error.empty()) << fit->error;
    ASSERT_GT(curve.x.size(), 10u) << curve.dist;
    const fitting::Sid law = sid_from_fit(*fit);
    for (std::size_t j = 0; j < curve.x.size(); j += 17)
      EXPECT_NEAR(curve.pdf[j], pdf(law, curve.x[j]), 1e-9 * pdf(law, curve.x[j]))
          << curve.dist << " at " << curve.x[j];
  }
  for (const auto& t : report.thresholds) {
    const fitting::ThresholdEntry* mine = find_threshold(view.report, t.result.method, t.result.density);
    ASSERT_NE(mine, nullptr);
    EXPECT_DOUBLE_EQ(mine->result.threshold, t.result.threshold) << t.result.method;
  }
}

TEST(GuiVectorView, BadInputThrows) {
  const std::vector<float> zeros(100, 0.0f);
  EXPECT_THROW(analyse_vector(zeros, "z", 0, {}), Error);
  const std::vector<float> g{1.0f, -2.0f, 3.0f};
  ViewOptions bad;
  bad.bins = 0;
  EXPECT_THROW(analyse_vector(g, "g", 0, bad), Error);
  fitting::DistFit failed;
  failed.dist = "gamma";
  failed.error = "all values equal";
  EXPECT_THROW(sid_from_fit(failed), Error);
  fitting::DistFit unknown;
  unknown.dist = "cauchy";
  EXPECT_THROW(sid_from_fit(unknown), Error);
}

TEST(GuiTrainingSource, RowsAreStridedAndKeepTheLast) {
  EXPECT_EQ(SnapshotTrainingSource::rows_for(0, 40), std::vector<std::size_t>{});
  EXPECT_EQ(SnapshotTrainingSource::rows_for(3, 40), (std::vector<std::size_t>{0, 1, 2}));
  const auto rows = SnapshotTrainingSource::rows_for(1000, 40);
  EXPECT_LE(rows.size(), 41u);
  EXPECT_EQ(rows.front(), 0u);
  EXPECT_EQ(rows.back(), 999u);
}

TEST(GuiTrainingSource, OnTheFlySeriesMatchFitReportPerStep) {
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 3, 12);
  auto reader = std::make_shared<data::SnapshotReader>(dir / "s.h5");
  fitting::FitReportOptions options;
  SnapshotTrainingSource source(reader, options);
  std::atomic<bool> cancel{false};
  int calls = 0;
  const TrainingSeries series = source.load(
      "fc.weight", 0.0,
      [&](int done, int total) {
        ++calls;
        EXPECT_LE(done, total);
      },
      cancel);
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(series.steps, (std::vector<std::int64_t>{0, 10, 20}));
  const std::size_t offset = 16 * 8 * 3 * 3, n = 64 * 100;
  for (int s = 0; s < 3; ++s) {
    std::span<const float> fc(models[s].data() + offset, n);
    kernels::cpu::CpuPasses passes(fc);
    const fitting::FitReport report = fitting::fit_report(passes, options);
    for (const auto& p : series.ks)
      if (p.step == 10 * s) {
        EXPECT_DOUBLE_EQ(p.ks_D, find_fit(report, p.dist)->ks_D) << p.dist;
      }
    for (const auto& p : series.methods)
      if (p.step == 10 * s) {
        const fitting::ThresholdEntry* t = find_threshold(report, p.method, p.density);
        ASSERT_NE(t, nullptr);
        EXPECT_DOUBLE_EQ(p.quality, t->result.quality) << p.method;
        EXPECT_EQ(p.stages, t->result.stages) << p.method;
      }
  }
  EXPECT_EQ(series.ks.size(), 3 * fitting::all_dists().size());
  EXPECT_EQ(series.methods.size(), 3 * fitting::all_methods().size() * options.densities.size());
  EXPECT_THROW(source.load("no.such.layer", 0.0, {}, cancel), Error);
}

// On the window's backend; a device failure anywhere in the series is thrown, never a point.
TEST(GuiTrainingSource, DeviceFailuresAreThrownNotPoints) {
  TempDir dir;
  write_snapshot(dir / "s.h5", 3, 13);
  auto reader = std::make_shared<data::SnapshotReader>(dir / "s.h5");
  fitting::FitReportOptions options;
  options.densities = {0.01};
  std::atomic<bool> cancel{false};
  const std::int64_t allocations = gs::testing::cuda_host_allocations(
      [&] { SnapshotTrainingSource(reader, options, "cuda-host").load("fc.weight", 0.0, {}, cancel); });
  ASSERT_GT(allocations, 8);
  for (int part = 0; part < 8; ++part) {
    SnapshotTrainingSource source(reader, options, "cuda-host");
    gs::testing::InjectedOutOfMemory oom(allocations * part / 8);
    EXPECT_THROW(source.load("fc.weight", 0.0, {}, cancel), DeviceFailure) << part;
  }
  // The backend is the one given: cpu never meets cuda-host's failure.
  gs::testing::InjectedOutOfMemory oom(0);
  const TrainingSeries cpu = SnapshotTrainingSource(reader, options, "cpu").load("fc.weight", 0.0, {}, cancel);
  EXPECT_EQ(cpu.steps.size(), 3u);
}

TEST(GuiTrainingSource, AnalysisFileSeriesAreItsRows) {
  TempDir dir;
  write_snapshot(dir / "run.h5", 3, 13);
  analyzer::AnalyzeConfig config;
  config.input = dir / "run.h5";
  config.output = dir / "run.analysis.h5";
  config.vectors = analyzer::VectorSet::layers;
  config.quiet = true;
  analyzer::analyze(config);
  EXPECT_EQ(find_analysis_beside(dir / "run.h5"), dir / "run.analysis.h5");
  EXPECT_TRUE(find_analysis_beside(dir / "other.h5").empty());

  auto reader = std::make_shared<data::SnapshotReader>(dir / "run.h5");
  auto source = make_training_source(reader, dir / "run.analysis.h5", {});
  std::atomic<bool> cancel{false};
  const TrainingSeries series = source->load("conv1.weight", 0.0, {}, cancel);
  EXPECT_NE(series.origin.find("analysis file"), std::string::npos);
  ASSERT_EQ(series.steps, (std::vector<std::int64_t>{0, 10, 20}));
  analyzer::AnalysisReader rows(dir / "run.analysis.h5");
  std::size_t fits = 0;
  for (const auto& f : rows.fits()) {
    if (f.scope != "conv1.weight") continue;
    ++fits;
    bool found = false;
    for (const auto& p : series.ks)
      if (p.step == f.step && p.dist == f.dist) {
        found = true;
        EXPECT_DOUBLE_EQ(p.ks_D, f.ks_D);
      }
    EXPECT_TRUE(found) << f.dist << " at " << f.step;
  }
  EXPECT_EQ(series.ks.size(), fits);
  // The whole model was not analysed (granularity layer): the series come from the snapshot.
  const TrainingSeries model = source->load(kModelScope, 0.0, {}, cancel);
  EXPECT_NE(model.origin.find("computed from the snapshot"), std::string::npos);
  EXPECT_EQ(model.steps.size(), 3u);
  EXPECT_THROW(make_training_source(reader, dir / "run.h5", {}), Error);  // not an analysis file
}

}  // namespace
}  // namespace gs::gui
