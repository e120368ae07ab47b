// Exports with their context: file names and plot titles that say snapshot, layer, step and ratio;
// no file replaced without consent (the window's exports) or --force (the command line); CSV files
// that hold exactly the numbers shown.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <QFile>
#include <QImage>
#include <qcustomplot.h>

#include "gs/analyzer/plots/charts.hpp"
#include "gui/gui_fixtures.hpp"

namespace gs::gui {
namespace {

using testing::qpath;
using testing::run_gui;
using testing::TempDir;
using testing::wait_idle;
using testing::write_snapshot;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The CSV's rows (header dropped), each split at commas (the fields here hold none).
std::vector<QStringList> csv_rows(const std::filesystem::path& p) {
  QStringList lines = QString::fromStdString(read_text(p)).split('\n', Qt::SkipEmptyParts);
  std::vector<QStringList> rows;
  for (int i = 1; i < lines.size(); ++i) rows.push_back(lines[i].split(','));
  return rows;
}

TEST(GuiExports, NamesAndCaptionsCarryTheContext) {
  EXPECT_EQ(export_stem({"/runs/cnn.h5", "fc1.weight", 12, 0.01}), "cnn-fc1.weight-step12-r0.01");
  EXPECT_EQ(export_stem({"cnn.h5", kModelScope, 0, 0.001}), "cnn-model-step0-r0.001");
  EXPECT_EQ(export_stem({"a b.h5", "enc/layer 1", 3, 0.1}), "a_b-enc_layer_1-step3-r0.1");
  EXPECT_EQ(export_caption({"cnn.h5", "fc1.weight", 12, 0.01}), "fc1.weight, step 12, ratio 0.01");
  EXPECT_EQ(export_caption({"cnn.h5", kModelScope, 12, 0.01}), "whole model, step 12, ratio 0.01");
}

TEST(GuiExports, WindowExportsWithContextAndNeverReplacesUnasked) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "cnn.h5", 3, 41);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "cnn.h5")));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(w.selectStep(10));
  ASSERT_TRUE(w.selectRatio(0.01));
  ASSERT_TRUE(wait_idle(w));
  ASSERT_NE(w.view(), nullptr);
  ASSERT_NE(w.series(), nullptr);
  const QString stem = "cnn-fc.weight-step10-r0.01";
  EXPECT_EQ(export_stem(w.exportContext()), stem);

  // Every plot's title names what it shows; the single-plot export suggests the context's name.
  const QCustomPlot* plots[] = {w.histogramPlot(), w.qqPlot(), w.ksPlot(), w.qualityPlot(), w.stagesPlot()};
  for (int i = 0; i < 5; ++i) {
    auto* plot = const_cast<QCustomPlot*>(plots[i]);
    EXPECT_TRUE(plot_title_text(plot).endsWith("\nfc.weight, step 10, ratio 0.01"))
        << plot_title_text(plot).toStdString();
    EXPECT_EQ(plot->property("gs_export_name").toString(), stem + "-" + plot_export_names()[i]);
  }

  // All plots: ten files named by the context; a second export replaces nothing unless allowed.
  const auto out = dir / "out";
  std::filesystem::create_directory(out);
  ASSERT_TRUE(w.exportPlots(qpath(out), false)) << w.errorText().toStdString();
  for (const QString& name : plot_export_names())
    for (const char* suffix : {".png", ".pdf"})
      EXPECT_TRUE(std::filesystem::exists(out / (stem + "-" + name + suffix).toStdString()))
          << name.toStdString() << suffix;
  EXPECT_FALSE(QImage(qpath(out / (stem + "-histogram.png").toStdString())).isNull());
  const auto mine = out / (stem + "-qq.pdf").toStdString();
  { std::ofstream(mine) << "mine"; }
  EXPECT_FALSE(w.exportPlots(qpath(out), false));
  EXPECT_TRUE(w.errorText().contains("exists")) << w.errorText().toStdString();
  EXPECT_EQ(read_text(mine), "mine");
  ASSERT_TRUE(w.exportPlots(qpath(out), true));
  EXPECT_EQ(read_text(mine).substr(0, 4), "%PDF");

  // CSV: the table and the series at full precision.
  ASSERT_TRUE(w.exportCsv(qpath(out), false)) << w.errorText().toStdString();
  auto csv = [&](const char* name) { return out / (stem + "-" + name + ".csv").toStdString(); };
  const auto table = csv_rows(csv("thresholds"));
  std::size_t at_ratio = 0;
  for (const auto& t : w.view()->report.thresholds) at_ratio += t.result.density == 0.01;
  ASSERT_EQ(table.size(), at_ratio);
  for (const auto& row : table) {
    const auto* t = find_threshold(w.view()->report, row[0].toStdString(), 0.01);
    ASSERT_NE(t, nullptr) << row[0].toStdString();
    EXPECT_EQ(row[3].toDouble(), t->result.threshold) << row[0].toStdString();
    EXPECT_EQ(row[4].toULongLong(), t->result.selected) << row[0].toStdString();
  }
  const auto bins = csv_rows(csv("histogram"));
  ASSERT_EQ(bins.size(), w.view()->histogram.counts.size());
  for (std::size_t i = 0; i < bins.size(); ++i)
    EXPECT_EQ(bins[i][2].toULongLong(), w.view()->histogram.counts[i]) << "bin " << i;
  const auto ks = csv_rows(csv("ks"));
  ASSERT_EQ(ks.size(), w.series()->ks.size());
  for (std::size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(ks[i][0].toLongLong(), w.series()->ks[i].step);
    if (std::isfinite(w.series()->ks[i].ks_D)) {
      EXPECT_EQ(ks[i][2].toDouble(), w.series()->ks[i].ks_D);
    }
  }
  EXPECT_EQ(csv_rows(csv("quality")).size(), 3 * fitting::all_methods().size());
  EXPECT_EQ(csv_rows(csv("curves")).size() > 100, true);
  EXPECT_FALSE(csv_rows(csv("qq")).empty());
  EXPECT_FALSE(csv_rows(csv("stages")).empty());
  { std::ofstream(csv("ks")) << "mine"; }
  EXPECT_FALSE(w.exportCsv(qpath(out), false));
  EXPECT_EQ(read_text(csv("ks")), "mine");
}

TEST(GuiExports, CommandLineWritesCsvAndRefusesToOverwriteWithoutForce) {
  TempDir dir;
  write_snapshot(dir / "cnn.h5", 2, 42);
  const QString out = qpath(dir / "csv");
  const QStringList args{qpath(dir / "cnn.h5"), "--export-csv", out, "--layer", "fc.bias", "--step", "10"};
  QString said;
  ASSERT_EQ(run_gui(args, &said), 0) << said.toStdString();
  EXPECT_TRUE(said.contains("wrote 7 CSV files")) << said.toStdString();
  for (const QString& name : csv_export_names())
    EXPECT_TRUE(std::filesystem::exists(dir / "csv" / ("cnn-fc.bias-step10-r0.01-" + name + ".csv").toStdString()))
        << name.toStdString();
  const auto table = dir / "csv" / "cnn-fc.bias-step10-r0.01-thresholds.csv";
  EXPECT_EQ(csv_rows(table).size(), fitting::all_methods().size());
  { std::ofstream(table) << "mine"; }
  EXPECT_EQ(run_gui(args, &said), 2);
  EXPECT_TRUE(said.contains("exists; pass --force to overwrite it")) << said.toStdString();
  EXPECT_EQ(said.count("gradscope-gui:"), 1) << said.toStdString();  // one line
  EXPECT_EQ(read_text(table), "mine");
  ASSERT_EQ(run_gui(args + QStringList{"--force"}, &said), 0) << said.toStdString();
  EXPECT_EQ(csv_rows(table).size(), fitting::all_methods().size());
}

}  // namespace
}  // namespace gs::gui
