// The report's plots (analyzer/plots/): every PNG is written, valid and not blank, the Markdown
// embeds each with a caption, nothing is replaced without force, a missing snapshot turns the
// histogram into a note, and the numbers behind the charts match the summary. No QApplication is
// made here: the renderer must make its own, off-screen.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <QApplication>
#include <QImage>
#include <qcustomplot.h>

#include "common/temp_dir.hpp"
#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/plots/report_plots.hpp"
#include "gs/analyzer/plots/series.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/error.hpp"
#include "synthetic_snapshot.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
using gs::testing::TempDir;

AnalyzeConfig config_for(const TempDir& dir, VectorSet g = VectorSet::both) {
  test::write_synthetic_snapshot(dir / "snap.h5", 3);
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / "a.h5";
  c.densities = {0.1, 0.01};
  c.vectors = g;
  c.backend = "cpu";
  c.quiet = true;
  c.report_dir = dir / "report";
  analyze(c);
  return c;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A PNG by its signature, decodable, at the renderer's size, and a drawing rather than a blank:
// many colours, and some but not most pixels away from white.
void expect_drawn_png(const fs::path& file) {
  SCOPED_TRACE(file.string());
  ASSERT_TRUE(fs::exists(file));
  EXPECT_EQ(read_text(file).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const QImage image(QString::fromStdString(file.string()));
  ASSERT_FALSE(image.isNull());
  EXPECT_GE(image.width(), 900);
  EXPECT_GE(image.height(), 500);
  std::set<QRgb> colours;
  std::size_t inked = 0, total = 0;
  for (int y = 0; y < image.height(); y += 2)
    for (int x = 0; x < image.width(); x += 2, ++total) {
      const QRgb c = image.pixel(x, y);
      colours.insert(c);
      if (qRed(c) + qGreen(c) + qBlue(c) < 3 * 235) ++inked;
    }
  EXPECT_GE(colours.size(), 16u);
  EXPECT_GT(double(inked) / double(total), 0.01);
  EXPECT_LT(double(inked) / double(total), 0.9);
}

// The image is embedded (![title](file)) and followed by its one-line italic caption.
void expect_embedded(const std::string& md, const std::string& file) {
  const auto at = md.find("](" + file + ")\n\n*");
  ASSERT_NE(at, std::string::npos) << file << " not embedded in\n" << md;
  const auto caption_end = md.find("*\n", at + file.size() + 5);
  ASSERT_NE(caption_end, std::string::npos);
  EXPECT_EQ(md.substr(at, caption_end - at).find('\n', file.size() + 5), std::string::npos)
      << "caption of " << file << " spans lines";
}

TEST(ReportPlots, EveryPlotIsADrawnPngEmbeddedWithACaption) {
  TempDir dir;
  const AnalyzeConfig c = config_for(dir);
  const AnalysisReader reader(c.output);
  export_outputs(c, reader, plots::render_report_plots);

  // The renderer made the QApplication itself and left printf's decimal point alone.
  ASSERT_NE(qobject_cast<QApplication*>(QCoreApplication::instance()), nullptr);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f", 1.5);
  EXPECT_STREQ(buf, "1.5");

  const std::string md = read_text(c.report_dir / "report.md");
  for (const char* file :
       {"ks-conv-weight.png", "ks-bias.png", "ks-linear-weight.png", "ks-norm-weight.png", "ks-whole-model.png",
        "quality-0.1.png", "quality-0.01.png", "threshold-error.png", "histogram.png", "qq.png"}) {
    expect_drawn_png(c.report_dir / file);
    expect_embedded(md, file);
  }
  // The title names the density of the threshold lines: the middle of 0.01 and 0.1.
  EXPECT_NE(md.find("Histogram of |g| with fitted SIDs and thresholds at density 0.1: whole model, "
                    "step 20"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("No plots"), std::string::npos);
  EXPECT_EQ(md.find("skipped"), std::string::npos) << md;
}

TEST(ReportPlots, NothingIsReplacedWithoutForce) {
  TempDir dir;
  AnalyzeConfig c = config_for(dir);
  const AnalysisReader reader(c.output);
  export_outputs(c, reader, plots::render_report_plots);
  fs::remove(c.report_dir / "report.md");
  const fs::path png = c.report_dir / "ks-conv-weight.png";
  const auto before = fs::last_write_time(png);
  fs::remove(c.report_dir / "qq.png");
  try {
    export_outputs(c, reader, plots::render_report_plots);
    FAIL() << "an existing PNG was replaced without force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ks-conv-weight.png: already exists; pass --force"), std::string::npos)
        << e.what();
  }
  // Refused before drawing anything: the missing one was not written either.
  EXPECT_FALSE(fs::exists(c.report_dir / "qq.png"));
  EXPECT_FALSE(fs::exists(c.report_dir / "report.md"));
  EXPECT_EQ(fs::last_write_time(png), before);
  c.force = true;
  export_outputs(c, reader, plots::render_report_plots);
  expect_drawn_png(c.report_dir / "qq.png");
  EXPECT_TRUE(fs::exists(c.report_dir / "report.md"));
}

TEST(ReportPlots, WithoutTheSnapshotTheHistogramIsANote) {
  TempDir dir;
  const AnalyzeConfig c = config_for(dir, VectorSet::layers);
  fs::remove(c.input);
  const AnalysisReader reader(c.output);
  export_outputs(c, reader, plots::render_report_plots);
  const std::string md = read_text(c.report_dir / "report.md");
  EXPECT_FALSE(fs::exists(c.report_dir / "histogram.png"));
  EXPECT_NE(md.find("- Histogram skipped: the snapshot could not be read"), std::string::npos) << md;
  // No whole model: the per-vector plots show the largest layer, fc1.weight (3200 values).
  EXPECT_FALSE(fs::exists(c.report_dir / "ks-whole-model.png"));
  expect_drawn_png(c.report_dir / "qq.png");
  expect_embedded(md, "qq.png");
  EXPECT_NE(md.find("): fc1.weight, step 20]"), std::string::npos) << md;
  expect_drawn_png(c.report_dir / "quality-0.1.png");
}

TEST(ReportPlots, ThresholdErrorBarsAreTheSummarysNumbers) {
  TempDir dir;
  const AnalyzeConfig c = config_for(dir);
  const AnalysisReader reader(c.output);
  const auto bars = plots::threshold_error_bars(reader.vectors(), reader.thresholds(), reader.options());
  const AnalysisSummary s = summarize(reader);
  ASSERT_FALSE(bars.empty());
  for (const auto& b : bars) {
    SCOPED_TRACE(b.method + " at " + std::to_string(b.density));
    EXPECT_NE(b.method, "topk");
    bool found = false;
    for (const auto& q : s.quality)
      if (q.method == b.method && q.density == b.density) {
        found = true;
        EXPECT_DOUBLE_EQ(b.median, q.median_abs_rel_error);
        EXPECT_EQ(b.count, q.count);
      }
    EXPECT_TRUE(found);
    EXPECT_LE(b.p5, b.median);
    EXPECT_LE(b.median, b.p95);
  }
  // n x density >= 100 only at 0.1 here (fc1.weight 320, whole model 390.4): every method but
  // top-k, 2 vectors at each of 3 steps.
  EXPECT_EQ(bars.size(), gs::fitting::all_methods().size() - 1);
  EXPECT_EQ(bars.front().count, 2u * 3u);
}

// An error of exactly 0 (sidco-topk is exact) is no bar at the log axis' floor, which would read
// as an error that large: the chart writes "0 (exact)" there instead, and draws the others' bars.
TEST(ReportPlots, ZeroThresholdErrorIsWrittenNotDrawnAsABar) {
  plots::ensure_application();
  QCustomPlot plot;
  plots::setup_plot(&plot, "threshold error");
  const std::vector<plots::ErrorBar> bars = {
      {"sidco-e", 0.01, 6, 0.05, 0.01, 0.2}, {"sidco-topk", 0.01, 6, 0.0, 0.0, 0.0}, {"dgc", 0.01, 6, 0.0, 0.0, 0.3}};
  plots::plot_threshold_error(&plot, bars);
  QCPBars* drawn = nullptr;
  for (int i = 0; i < plot.plottableCount(); ++i)
    if (auto* b = qobject_cast<QCPBars*>(plot.plottable(i)); b && b->name() == "ratio 0.01") drawn = b;
  ASSERT_NE(drawn, nullptr);
  ASSERT_EQ(drawn->data()->size(), 1);  // sidco-e's bar alone, at its median
  EXPECT_DOUBLE_EQ(drawn->data()->begin()->key, 1.0);
  EXPECT_DOUBLE_EQ(drawn->data()->begin()->value, 0.05);
  std::map<QString, QCPItemText*> zero;  // by method
  for (int i = 0; i < plot.itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot.item(i)); t && t->objectName() == plots::kZeroErrorItem)
      zero[t->property("gs_method").toString()] = t;
  ASSERT_EQ(zero.size(), 2u);
  EXPECT_EQ(zero["sidco-topk"]->text(), "0 (exact)");
  EXPECT_DOUBLE_EQ(zero["sidco-topk"]->position->key(), 2.0);
  // At the floor of the axis, which lies below every error drawn.
  EXPECT_DOUBLE_EQ(zero["sidco-topk"]->position->value(), plot.yAxis->range().lower);
  EXPECT_LT(plot.yAxis->range().lower, 0.01);
  EXPECT_EQ(zero["dgc"]->text(), "median 0");  // some vectors had an error: not exact
}

TEST(ReportPlots, KindSeriesAreMediansOverTheKindsScopes) {
  const double nan = std::nan("");
  auto fit = [](std::int64_t step, const char* scope, const char* kind, double ks, bool failed) {
    FitRow f;
    f.step = step;
    f.scope = scope;
    f.kind = kind;
    f.dist = "gamma";
    f.ks_D = ks;
    if (failed) f.error = "too few values";
    return f;
  };
  const std::vector<FitRow> fits = {fit(0, "a.bias", kKindBias, 0.1, false),  fit(0, "b.bias", kKindBias, 0.4, false),
                                    fit(0, "c.bias", kKindBias, 0.3, false),  fit(10, "a.bias", kKindBias, nan, true),
                                    fit(10, "b.bias", kKindBias, 0.2, false), fit(0, "w", kKindLinear, 0.9, false)};
  const auto kind = plots::series_from_rows(fits, {}, kKindBias, plots::SeriesOf::kind);
  ASSERT_EQ(kind.steps, (std::vector<std::int64_t>{0, 10}));
  ASSERT_EQ(kind.ks.size(), 2u);
  EXPECT_DOUBLE_EQ(kind.ks[0].ks_D, 0.3);  // median of 0.1, 0.4, 0.3
  EXPECT_DOUBLE_EQ(kind.ks[1].ks_D, 0.2);  // the failed fit is left out
  const auto scope = plots::series_from_rows(fits, {}, "a.bias");
  ASSERT_EQ(scope.ks.size(), 2u);
  EXPECT_DOUBLE_EQ(scope.ks[0].ks_D, 0.1);
  EXPECT_TRUE(std::isnan(scope.ks[1].ks_D));
}

}  // namespace
}  // namespace gs::analyzer
