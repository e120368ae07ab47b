// The main window against direct computations: the plotted histogram, fitted densities and
// threshold lines; the series over training; live files; bad files and selections; exports; and
// the --screenshot command of the executable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include <QImage>
#include <QProcess>
#include <QTableWidget>
#include <qcustomplot.h>

#include "common/device_faults.hpp"
#include "gs/analyzer/plots/charts.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"
#include "gui/gui_fixtures.hpp"

namespace gs::gui {
namespace {

using testing::TempDir;
using testing::wait_idle;
using testing::write_snapshot;

constexpr std::size_t kFcOffset = 16 * 8 * 3 * 3, kFcSize = 64 * 100;

TEST(GuiWindow, PlotsMatchDirectComputation) {
  testing::app();
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 3, 21);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(QString::fromStdString((dir / "s.h5").string())));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(w.selectStep(10));
  ASSERT_TRUE(w.selectRatio(0.01));
  ASSERT_TRUE(wait_idle(w));
  ASSERT_TRUE(w.errorText().isEmpty()) << w.errorText().toStdString();
  ASSERT_NE(w.view(), nullptr);
  EXPECT_EQ(w.view()->scope, "fc.weight");
  EXPECT_EQ(w.view()->step, 10);

  std::span<const float> g(models[1].data() + kFcOffset, kFcSize);
  // Histogram: every plotted bin's density times n and width is the kernels' count of that bin.
  const auto& h = w.view()->histogram;
  const auto direct = kernels::cpu::log_histogram(g, h.lo, h.hi, int(h.counts.size()));
  std::uint64_t nonzero = 0;
  for (float v : g) nonzero += v != 0.0f;
  QCPGraph* hist = find_graph(w.histogramPlot(), "histogram");
  ASSERT_NE(hist, nullptr);
  std::size_t nonempty = 0;
  for (auto c : direct.counts) nonempty += c > 0;
  // A point per bin and one beyond each end; empty bins are NaN (gaps).
  ASSERT_EQ(std::size_t(hist->dataCount()), direct.counts.size() + 2);
  std::size_t drawn = 0;
  for (int i = 0; i < hist->dataCount(); ++i) {
    const double key = hist->data()->at(i)->key, density = hist->data()->at(i)->value;
    if (std::isnan(density)) continue;
    ++drawn;
    const double bin = std::floor(std::log(key / h.lo) / std::log(h.hi / h.lo) * double(h.counts.size()));
    const auto b = std::size_t(bin);
    ASSERT_LT(b, direct.counts.size());
    const double width = direct.edge(b + 1) - direct.edge(b);
    EXPECT_NEAR(density * double(nonzero) * width, double(direct.counts[b]), 1e-6) << "bin " << b;
  }
  EXPECT_EQ(drawn, nonempty);

  // Fitted densities and threshold lines against fit_report run here on the same values.
  kernels::cpu::CpuPasses passes(g);
  const fitting::FitReport report = fitting::fit_report(passes, fitting::FitReportOptions{});
  for (const auto& fit : report.fits) {
    QCPGraph* curve = find_graph(w.histogramPlot(), QString::fromStdString(fit.dist));
    ASSERT_NE(curve, nullptr) << fit.dist;
    ASSERT_GT(curve->dataCount(), 10);
    const fitting::Sid law = sid_from_fit(fit);
    for (int i = 0; i < curve->dataCount(); i += 23) {
      const auto p = curve->data()->at(i);
      EXPECT_NEAR(p->value, pdf(law, p->key), 1e-9 * pdf(law, p->key)) << fit.dist;
    }
  }
  std::set<std::string> lines;
  for (int i = 0; i < w.histogramPlot()->graphCount(); ++i) {
    QCPGraph* graph = w.histogramPlot()->graph(i);
    const std::string method = graph->property("gs_method").toString().toStdString();
    if (method.empty()) continue;
    lines.insert(method);
    const fitting::ThresholdEntry* t = find_threshold(report, method, 0.01);
    ASSERT_NE(t, nullptr) << method;
    EXPECT_DOUBLE_EQ(graph->data()->at(0)->key, t->result.threshold) << method;
    EXPECT_DOUBLE_EQ(graph->data()->at(1)->key, t->result.threshold) << method;
    // The legend names the count the method selects.
    EXPECT_TRUE(graph->name().contains(QLocale().toString(qulonglong(t->result.selected))))
        << graph->name().toStdString();
  }
  EXPECT_EQ(lines, std::set<std::string>(fitting::all_methods().begin(), fitting::all_methods().end()));
  // The table lists every method at the density with its threshold and the count it selects.
  ASSERT_EQ(w.thresholdTable()->rowCount(), int(fitting::all_methods().size()));
  for (int row = 0; row < w.thresholdTable()->rowCount(); ++row) {
    const std::string method = w.thresholdTable()->item(row, 0)->text().toStdString();
    const fitting::ThresholdEntry* t = find_threshold(report, method, 0.01);
    ASSERT_NE(t, nullptr) << method;
    EXPECT_EQ(w.thresholdTable()->item(row, 1)->text(), QString::number(t->result.threshold, 'e', 2));
    EXPECT_EQ(w.thresholdTable()->item(row, 2)->text(), QLocale().toString(qulonglong(t->result.selected)));
  }

  // QQ points of the chosen law (gamma by default): the view's tail points (GuiQQ checks them
  // against the sample), of the law fit_report fitted.
  QCPGraph* qq = find_graph(w.qqPlot(), "gamma");
  ASSERT_NE(qq, nullptr);
  const fitting::DistFit* gamma = find_fit(report, "gamma");
  const fitting::DistFit* shown = find_fit(w.view()->report, "gamma");
  ASSERT_NE(shown, nullptr);
  EXPECT_EQ(shown->params, gamma->params);
  ASSERT_EQ(qq->dataCount(), int(shown->qq.size()));
  EXPECT_DOUBLE_EQ(qq->data()->at(3)->value, shown->qq[3].sample);

  // Over training (on the fly): one KS point per recorded step, equal to fit_report's.
  ASSERT_NE(w.series(), nullptr);
  QCPGraph* ks = find_graph(w.ksPlot(), "gamma");
  ASSERT_NE(ks, nullptr);
  ASSERT_EQ(ks->dataCount(), 3);
  EXPECT_DOUBLE_EQ(ks->data()->at(1)->value, gamma->ks_D);
  QCPGraph* quality = find_graph(w.qualityPlot(), "sidco-e");
  ASSERT_NE(quality, nullptr);
  EXPECT_DOUBLE_EQ(quality->data()->at(1)->value, find_threshold(report, "sidco-e", 0.01)->result.quality);
  EXPECT_NE(find_graph(w.qualityPlot(), "ideal"), nullptr);
  EXPECT_NE(find_graph(w.qualityPlot(), QString::fromUtf8("\u00b120%")), nullptr);
  QCPGraph* stages = find_graph(w.stagesPlot(), "sidco-gp");
  ASSERT_NE(stages, nullptr);
  EXPECT_NEAR(stages->data()->at(1)->value, find_threshold(report, "sidco-gp", 0.01)->result.stages, 0.1);

  // Another density moves the lines without a new job.
  ASSERT_TRUE(w.selectRatio(0.001));
  EXPECT_FALSE(w.busy());
  for (int i = 0; i < w.histogramPlot()->graphCount(); ++i) {
    QCPGraph* graph = w.histogramPlot()->graph(i);
    const std::string method = graph->property("gs_method").toString().toStdString();
    if (!method.empty()) {
      EXPECT_DOUBLE_EQ(graph->data()->at(0)->key, find_threshold(report, method, 0.001)->result.threshold);
    }
  }
}

TEST(GuiWindow, BadFilesShowAMessageAndTheWindowLives) {
  testing::app();
  TempDir dir;
  { std::ofstream(dir / "bad.h5") << "this is not an HDF5 file\n"; }
  MainWindow w;
  EXPECT_FALSE(w.openSnapshot(QString::fromStdString((dir / "bad.h5").string())));
  EXPECT_TRUE(w.errorText().contains("Cannot open")) << w.errorText().toStdString();
  EXPECT_FALSE(w.openSnapshot(QString::fromStdString((dir / "missing.h5").string())));
  EXPECT_TRUE(w.errorText().contains("missing.h5"));

  // Half a file: its first half only.
  write_snapshot(dir / "s.h5", 2, 22);
  const auto size = std::filesystem::file_size(dir / "s.h5");
  std::filesystem::copy_file(dir / "s.h5", dir / "half.h5");
  std::filesystem::resize_file(dir / "half.h5", size / 2);
  const bool opened = w.openSnapshot(QString::fromStdString((dir / "half.h5").string()));
  ASSERT_TRUE(wait_idle(w));
  if (!opened) {
    EXPECT_FALSE(w.errorText().isEmpty());
  }
  // Either way the window still opens a good file afterwards.
  ASSERT_TRUE(w.openSnapshot(QString::fromStdString((dir / "s.h5").string())));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_TRUE(w.errorText().isEmpty()) << w.errorText().toStdString();
  EXPECT_NE(w.view(), nullptr);

  // Bad selections are messages too.
  EXPECT_FALSE(w.selectScope("no.such.layer"));
  EXPECT_TRUE(w.errorText().contains("fc.weight"));  // the message lists the layers
  EXPECT_FALSE(w.selectStep(12345));
  EXPECT_FALSE(w.selectRatio(1.5));
  EXPECT_TRUE(w.errorText().contains("outside (0, 1)"));
}

// A device that fails while the window fits (cuda-host's injected out-of-memory, at the start and
// in the middle of the fits and methods): one message that names it, and no table rows, curves or
// series points made of it.
TEST(GuiWindow, ADeviceFailureIsAMessageNotRows) {
  testing::app();
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 3, 23);
  ViewOptions options;
  options.backend = "cuda-host";
  // The window first fits the whole model at the last step: its allocations, counted here.
  const std::int64_t allocations = gs::testing::cuda_host_allocations([&] {
    const auto passes = kernels::make_passes(models[2], kernels::BackendKind::cuda_host);
    fitting::fit_report(*passes, options.report);
  });
  ASSERT_GT(allocations, 2);
  for (const std::int64_t after : {std::int64_t{0}, allocations / 2}) {
    SCOPED_TRACE("out of memory after " + std::to_string(after) + " allocations");
    MainWindow w(options);
    gs::testing::InjectedOutOfMemory oom(after);
    ASSERT_TRUE(w.openSnapshot(QString::fromStdString((dir / "s.h5").string())));
    ASSERT_TRUE(wait_idle(w));
    const std::string error = w.errorText().toStdString();
    EXPECT_NE(error.find("device failure: CUDA error: cudaErrorMemoryAllocation (out of memory)"), std::string::npos)
        << error;
    EXPECT_NE(error.find("--backend cpu"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_EQ(w.view(), nullptr);
    EXPECT_EQ(w.thresholdTable()->rowCount(), 0);
  }
}

TEST(GuiWindow, LiveModeFollowsAGrowingFile) {
  testing::app();
  TempDir dir;
  data::SnapshotMeta meta;
  meta.model = "live";
  data::SnapshotWriter writer(dir / "live.h5", meta, testing::synthetic_layers());
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  auto append = [&](std::int64_t step) {
    std::vector<std::vector<float>> grads;
    std::vector<std::span<const float>> spans;
    for (const auto& l : writer.layers()) {
      grads.emplace_back(std::size_t(l.numel()));
      for (auto& v : grads.back()) v = normal(rng);
    }
    for (const auto& g : grads) spans.emplace_back(g);
    writer.append({step, 1.0, 0.1}, spans);
  };
  append(0);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(QString::fromStdString((dir / "live.h5").string())));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_EQ(w.stepCount(), 1u);
  w.setLive(true);
  append(5);
  append(9);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (w.stepCount() < 3 && std::chrono::steady_clock::now() < deadline)
    QApplication::processEvents(QEventLoop::AllEvents, 50);
  ASSERT_EQ(w.stepCount(), 3u);
  ASSERT_TRUE(wait_idle(w));
  ASSERT_NE(w.view(), nullptr);
  EXPECT_EQ(w.view()->step, 9);  // the slider was at the end, so it follows
  ASSERT_NE(w.series(), nullptr);
  EXPECT_EQ(w.series()->steps, (std::vector<std::int64_t>{0, 5, 9}));
  w.setLive(false);
}

TEST(GuiWindow, ExportsPngAndPdf) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "s.h5", 1, 24);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(QString::fromStdString((dir / "s.h5").string())));
  ASSERT_TRUE(wait_idle(w));
  QString error;
  const QString png = QString::fromStdString((dir / "h.png").string());
  const QString pdf = QString::fromStdString((dir / "h.pdf").string());
  ASSERT_TRUE(export_plot(w.histogramPlot(), png, &error)) << error.toStdString();
  ASSERT_TRUE(export_plot(w.qualityPlot(), pdf, &error)) << error.toStdString();
  EXPECT_FALSE(QImage(png).isNull());
  std::ifstream in(dir / "h.pdf");
  std::string head(4, '\0');
  in.read(head.data(), 4);
  EXPECT_EQ(head, "%PDF");
  EXPECT_FALSE(export_plot(w.histogramPlot(), png + ".svg", &error));
  EXPECT_TRUE(error.contains(".png or .pdf"));
}

using testing::run_gui;

TEST(GuiScreenshot, RendersTheWindowAndRefusesToOverwrite) {
  TempDir dir;
  write_snapshot(dir / "s.h5", 2, 25);
  const QString file = QString::fromStdString((dir / "s.h5").string());
  const QString png = QString::fromStdString((dir / "shot.png").string());
  QString out;
  ASSERT_EQ(run_gui({file, "--screenshot", png, "--layer", "conv1.weight", "--step", "10", "--ratio", "0.01"}, &out), 0)
      << out.toStdString();
  EXPECT_TRUE(out.contains("first plot after")) << out.toStdString();
  const QImage image(png);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(1280, 720));
  std::set<QRgb> colours;
  for (int y = 0; y < image.height(); y += 7)
    for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
  EXPECT_GT(colours.size(), 50u);

  const auto before = std::filesystem::last_write_time(dir / "shot.png");
  EXPECT_NE(run_gui({file, "--screenshot", png}, &out), 0);
  EXPECT_TRUE(out.contains("--force")) << out.toStdString();
  EXPECT_EQ(std::filesystem::last_write_time(dir / "shot.png"), before);

  { std::ofstream(dir / "bad.h5") << "garbage"; }
  const QString bad_png = QString::fromStdString((dir / "bad.png").string());
  EXPECT_EQ(run_gui({QString::fromStdString((dir / "bad.h5").string()), "--screenshot", bad_png}, &out), 1);
  EXPECT_TRUE(out.contains("Cannot open")) << out.toStdString();
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.png"));
  EXPECT_EQ(run_gui({file, "--screenshot", bad_png, "--layer", "nope"}, &out), 1);
  EXPECT_TRUE(out.contains("No layer 'nope'")) << out.toStdString();
}

// Without a display, and without QT_QPA_PLATFORM saying which platform to use, a screenshot still
// renders: the executable picks Qt's offscreen platform itself.
TEST(GuiScreenshot, NeedsNoDisplay) {
  TempDir dir;
  write_snapshot(dir / "s.h5", 2, 25);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
  const QString png = QString::fromStdString((dir / "headless.png").string());
  QString out;
  ASSERT_EQ(run_gui({QString::fromStdString((dir / "s.h5").string()), "--screenshot", png}, &out, env), 0)
      << out.toStdString();
  const QImage image(png);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(1280, 720));
}

}  // namespace
}  // namespace gs::gui
