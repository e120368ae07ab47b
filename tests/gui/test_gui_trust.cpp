// What makes the viewer trustworthy: an analysis file is used only with the snapshot it was made
// of; the histogram leaves empty bins empty and the fitted curves stay on its support; a failed
// open keeps the file shown; --help needs no display; a quality without meaning is greyed out.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <QImage>
#include <QTableWidget>
#include <qcustomplot.h>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/plots/charts.hpp"
#include "gs/base/error.hpp"
#include "gui/gui_fixtures.hpp"

namespace gs::gui {
namespace {

using testing::qpath;
using testing::run_gui;
using testing::SnapshotSpec;
using testing::TempDir;
using testing::wait_idle;
using testing::write_snapshot;

constexpr const char* kCreated = "2024-06-01T12:00:00Z";

SnapshotSpec spec(std::string model = "cnn", std::vector<data::LayerInfo> layers = testing::synthetic_layers()) {
  return {std::move(model), std::move(layers), kCreated};
}

// An analysis of every layer and the whole model at density 0.01; steps: "" for all.
void analyze(const std::filesystem::path& snapshot, const std::filesystem::path& out, const std::string& steps = "") {
  analyzer::AnalyzeConfig config;
  config.input = snapshot;
  config.output = out;
  config.densities = {0.01};
  config.steps = analyzer::StepSelection::parse(steps);
  config.quiet = true;
  analyzer::analyze(config);
}

// The message make_training_source refuses the analysis with, or "" when it accepts it.
std::string refusal(const std::filesystem::path& snapshot, const std::filesystem::path& analysis) {
  auto reader = std::make_shared<data::SnapshotReader>(snapshot);
  try {
    make_training_source(reader, analysis, {});
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(GuiAnalysisMatch, TheFirstDifferenceIsNamedAndFewerStepsAreANote) {
  TempDir dir;
  write_snapshot(dir / "cnn.h5", 3, 31, spec());
  analyze(dir / "cnn.h5", dir / "cnn.analysis.h5");
  EXPECT_EQ(refusal(dir / "cnn.h5", dir / "cnn.analysis.h5"), "");

  auto layers = testing::synthetic_layers();
  write_snapshot(dir / "lstm.h5", 1, 32, spec("lstm"));
  std::string why = refusal(dir / "lstm.h5", dir / "cnn.analysis.h5");
  EXPECT_TRUE(contains(why, "model 'cnn', the snapshot records model 'lstm'")) << why;

  layers[2].name = "head.bias";
  write_snapshot(dir / "renamed.h5", 1, 33, spec("cnn", layers));
  why = refusal(dir / "renamed.h5", dir / "cnn.analysis.h5");
  EXPECT_TRUE(contains(why, "layer 'fc.bias', which the snapshot lacks")) << why;

  layers = testing::synthetic_layers();
  layers[1].shape = {64, 50};
  write_snapshot(dir / "smaller.h5", 1, 34, spec("cnn", layers));
  why = refusal(dir / "smaller.h5", dir / "cnn.analysis.h5");
  EXPECT_TRUE(contains(why, "layer 'fc.weight' has 6400 elements in it, 3200 in the snapshot")) << why;

  layers[1].shape = {100, 64};  // as many elements, another shape
  write_snapshot(dir / "transposed.h5", 1, 35, spec("cnn", layers));
  why = refusal(dir / "transposed.h5", dir / "cnn.analysis.h5");
  EXPECT_TRUE(contains(why, "layer shapes differ")) << why;

  SnapshotSpec again = spec();
  again.created = "2024-06-02T08:00:00Z";
  write_snapshot(dir / "again.h5", 3, 31, again);
  why = refusal(dir / "again.h5", dir / "cnn.analysis.h5");
  EXPECT_TRUE(contains(why, "another recording")) << why;
  for (const auto& name : {"lstm.h5", "renamed.h5", "smaller.h5", "transposed.h5", "again.h5"}) {
    why = refusal(dir / name, dir / "cnn.analysis.h5");
    EXPECT_TRUE(contains(why, "not an analysis of " + std::string(name) + ": ")) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
  }

  // Only the steps differ: usable, with a note.
  analyze(dir / "cnn.h5", dir / "part.analysis.h5", "0,10");
  auto reader = std::make_shared<data::SnapshotReader>(dir / "cnn.h5");
  auto source = make_training_source(reader, dir / "part.analysis.h5", {});
  const auto& part = dynamic_cast<const AnalysisTrainingSource&>(*source);
  EXPECT_EQ(part.note(), "covers 2 of the snapshot's 3 recorded steps (step 20 is not analysed)");
  std::atomic<bool> cancel{false};
  const TrainingSeries series = source->load("fc.weight", 0.0, {}, cancel);
  EXPECT_EQ(series.steps, (std::vector<std::int64_t>{0, 10}));
  EXPECT_TRUE(contains(series.origin, part.note())) << series.origin;
}

TEST(GuiAnalysisMatch, WindowAndCommandLineRefuseAMismatch) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "cnn.h5", 3, 36, spec());
  write_snapshot(dir / "lstm.h5", 2, 37, spec("lstm", {{"lstm.weight_ih_l0", {64, 16}}}));
  analyze(dir / "cnn.h5", dir / "cnn.analysis.h5");
  analyze(dir / "lstm.h5", dir / "lstm.analysis.h5");
  analyze(dir / "cnn.h5", dir / "part.analysis.h5", "0,10");

  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "cnn.h5"), qpath(dir / "lstm.analysis.h5")));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_TRUE(w.analysisFile().isEmpty());
  const std::string why = w.analysisError().toStdString();
  EXPECT_TRUE(contains(why, "model 'lstm', the snapshot records model 'cnn'")) << why;
  EXPECT_FALSE(contains(why, "\n")) << why;
  ASSERT_NE(w.series(), nullptr);
  EXPECT_TRUE(contains(w.series()->origin, "computed from the snapshot")) << w.series()->origin;

  // The dialog's path: a refused file leaves the analysis in use in place.
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "cnn.h5"), qpath(dir / "cnn.analysis.h5")));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_EQ(w.analysisFile(), qpath(dir / "cnn.analysis.h5"));
  EXPECT_FALSE(w.openAnalysis(qpath(dir / "lstm.analysis.h5")));
  EXPECT_TRUE(w.errorText().contains("model 'lstm'")) << w.errorText().toStdString();
  ASSERT_TRUE(wait_idle(w));
  EXPECT_EQ(w.analysisFile(), qpath(dir / "cnn.analysis.h5"));
  ASSERT_NE(w.series(), nullptr);
  EXPECT_TRUE(contains(w.series()->origin, "analysis file cnn.analysis.h5")) << w.series()->origin;
  EXPECT_EQ(w.series()->steps.size(), 3u);

  // Fewer steps: loaded, and said.
  ASSERT_TRUE(w.openAnalysis(qpath(dir / "part.analysis.h5")));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_TRUE(w.analysisNote().contains("covers 2 of the snapshot's 3")) << w.analysisNote().toStdString();
  EXPECT_EQ(w.series()->steps.size(), 2u);

  // The command line: refused in one line, non-zero, no screenshot; fewer steps: a line, exit 0.
  QString out;
  const QString png = qpath(dir / "shot.png");
  EXPECT_EQ(run_gui({qpath(dir / "cnn.h5"), "--analysis", qpath(dir / "lstm.analysis.h5"), "--screenshot", png}, &out),
            1);
  EXPECT_TRUE(out.contains("model 'lstm', the snapshot records model 'cnn'")) << out.toStdString();
  EXPECT_EQ(out.count("gradscope-gui:"), 1) << out.toStdString();  // one line
  EXPECT_FALSE(std::filesystem::exists(dir / "shot.png"));
  EXPECT_EQ(run_gui({qpath(dir / "cnn.h5"), "--analysis", qpath(dir / "lstm.analysis.h5")}, &out), 1);
  EXPECT_TRUE(out.contains("model 'lstm'")) << out.toStdString();
  EXPECT_EQ(run_gui({qpath(dir / "cnn.h5"), "--analysis", qpath(dir / "part.analysis.h5"), "--screenshot", png}, &out),
            0)
      << out.toStdString();
  EXPECT_TRUE(out.contains("part.analysis.h5 covers 2 of the snapshot's 3 recorded steps")) << out.toStdString();
  EXPECT_TRUE(std::filesystem::exists(dir / "shot.png"));
}

// fc2.bias-like: 10 values over three decades, most of 80 bins empty.
TEST(GuiHistogram, EmptyBinsAreGapsAndCurvesStayOnTheSupport) {
  testing::app();
  const std::vector<float> g{1e-4f, -1.1e-4f, 1e-3f, 2e-3f, -1e-2f, 3e-2f, 0.1f, -0.2f, 0.5f, 1.0f};
  const VectorView view = analyse_vector(g, "fc2.bias", 12, ViewOptions{});
  const auto& h = view.histogram;
  std::size_t nonempty = 0;
  for (auto c : h.counts) nonempty += c > 0;
  ASSERT_EQ(nonempty, 9u);  // 1e-4 and 1.1e-4 share the first bin

  QCustomPlot plot;
  setup_plot(&plot, "Histogram");
  plot_histogram(&plot, view, 0.01);
  QCPGraph* hist = find_graph(&plot, "histogram");
  ASSERT_NE(hist, nullptr);
  // A point per bin (and one beyond each end): NaN, a gap, exactly where the bin is empty.
  ASSERT_EQ(std::size_t(hist->dataCount()), h.counts.size() + 2);
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const auto p = hist->data()->at(int(i) + 1);
    EXPECT_NEAR(p->key, std::sqrt(h.edge(i) * h.edge(i + 1)), 1e-12 * p->key);
    EXPECT_EQ(std::isnan(p->value), h.counts[i] == 0) << "bin " << i;
  }

  // Drawn: the histogram alone, no grid or legend. The first non-empty bin is filled; the empty
  // bin after it is white at the same height.
  for (int i = 0; i < plot.graphCount(); ++i) plot.graph(i)->setVisible(plot.graph(i) == hist);
  for (QCPAxis* axis : {plot.xAxis, plot.yAxis}) {
    axis->grid()->setVisible(false);
    axis->grid()->setSubGridVisible(false);
  }
  plot.legend->setVisible(false);
  plot.setViewport(QRect(0, 0, 900, 600));
  plot.replot();
  const QImage image = plot.toPixmap(900, 600).toImage();
  std::size_t first = 0;
  while (h.counts[first] == 0) ++first;
  ASSERT_EQ(h.counts[first + 1], 0u);
  const double density = view.bin_density[0];
  const int y = int(std::lround((plot.yAxis->coordToPixel(density) + plot.axisRect()->bottom()) / 2.0));
  auto x_at = [&](double edge_a, double edge_b, double at) {  // at: 0 left edge .. 1 right edge
    return int(std::lround(plot.xAxis->coordToPixel(edge_a) * (1 - at) + plot.xAxis->coordToPixel(edge_b) * at));
  };
  const QRgb filled = image.pixel(x_at(h.edge(first), h.edge(first + 1), 0.5), y);
  EXPECT_NE(filled, qRgb(255, 255, 255));
  for (double at : {0.25, 0.5, 0.75})
    EXPECT_EQ(image.pixel(x_at(h.edge(first + 1), h.edge(first + 2), at), y), qRgb(255, 255, 255))
        << "empty bin " << first + 1 << " at " << at;

  // All values equal: one non-empty bin in a one-decade range; the curves stay on that bin.
  const std::vector<float> same(10, 0.5f);
  const VectorView one = analyse_vector(same, "b", 0, ViewOptions{});
  std::size_t bin = 0;
  while (one.histogram.counts[bin] == 0) ++bin;
  std::size_t drawn = 0;
  for (const auto& curve : one.curves) {
    if (curve.x.empty()) continue;
    ++drawn;
    EXPECT_GE(curve.x.front(), one.histogram.edge(bin) * (1 - 1e-12)) << curve.dist;
    EXPECT_LE(curve.x.back(), one.histogram.edge(bin + 1) * (1 + 1e-12)) << curve.dist;
  }
  EXPECT_GT(drawn, 0u);
}

TEST(GuiWindow, AFailedOpenKeepsTheFileShown) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "s.h5", 2, 38);
  { std::ofstream(dir / "garbage.h5") << "not HDF5"; }
  std::filesystem::copy_file(dir / "s.h5", dir / "cut.h5");
  std::filesystem::resize_file(dir / "cut.h5", 4096);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(wait_idle(w));
  ASSERT_NE(w.view(), nullptr);
  const QString title = w.windowTitle();
  EXPECT_TRUE(title.contains("s.h5"));
  for (const char* bad : {"cut.h5", "garbage.h5", "missing.h5"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(w.openSnapshot(qpath(dir / bad)));
    ASSERT_TRUE(wait_idle(w));
    EXPECT_TRUE(w.errorText().contains(bad)) << w.errorText().toStdString();
    EXPECT_TRUE(w.errorText().contains("still showing s.h5")) << w.errorText().toStdString();
    EXPECT_EQ(w.windowTitle(), title);
    ASSERT_NE(w.view(), nullptr);
    EXPECT_EQ(w.view()->scope, "fc.weight");
    EXPECT_EQ(w.stepCount(), 2u);
    EXPECT_NE(find_graph(w.histogramPlot(), "histogram"), nullptr);
    EXPECT_GT(w.thresholdTable()->rowCount(), 0);
  }
  // And the file shown still answers.
  ASSERT_TRUE(w.selectStep(0));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_EQ(w.view()->step, 0);
}

// A platform that needs a display, and none: --help and a mistaken option still answer.
TEST(GuiCommandLine, HelpNeedsNoDisplay) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY"}) env.remove(name);
  env.insert("QT_QPA_PLATFORM", "xcb");
  QString out;
  ASSERT_EQ(run_gui({"--help"}, &out, env), 0) << out.toStdString();
  for (const char* part : {"Usage: gradscope-gui", "--screenshot", "--export-csv", "--force", "--analysis"})
    EXPECT_TRUE(out.contains(part)) << part << "\n" << out.toStdString();
  EXPECT_EQ(run_gui({"--version"}, &out, env), 0) << out.toStdString();
  EXPECT_TRUE(out.startsWith("gradscope-gui ")) << out.toStdString();
  EXPECT_EQ(run_gui({"--no-such-option"}, &out, env), 2) << out.toStdString();
  EXPECT_TRUE(out.contains("no-such-option")) << out.toStdString();
}

TEST(GuiWindow, QualityWithoutMeaningIsGreyedOut) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "s.h5", 1, 39);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(w.selectRatio(0.01));
  const QColor grey(150, 150, 150);
  // fc.bias: 64 values, ratio x n = 0.64 < 1.
  ASSERT_TRUE(w.selectScope("fc.bias"));
  ASSERT_TRUE(wait_idle(w));
  QTableWidget* table = w.thresholdTable();
  ASSERT_GT(table->rowCount(), 0);
  for (int row = 0; row < table->rowCount(); ++row) {
    const QTableWidgetItem* q = table->item(row, 3);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->foreground().color(), grey) << table->item(row, 0)->text().toStdString();
    EXPECT_TRUE(q->toolTip().contains("ratio x n = 0.64 < 1")) << q->toolTip().toStdString();
  }
  // fc.weight: 6400 values, ratio x n = 64: green or red, as the quality says.
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(wait_idle(w));
  for (int row = 0; row < table->rowCount(); ++row) {
    const QTableWidgetItem* q = table->item(row, 3);
    if (!q) continue;  // a failed method
    const bool within = std::abs(q->text().toDouble() - 1.0) <= 0.2;
    EXPECT_EQ(q->foreground().color(), within ? QColor(20, 120, 20) : QColor(180, 20, 20));
  }
}

}  // namespace
}  // namespace gs::gui
