// Issue 61, second half: any ratio (typed, or one the analysis file lacks, computed from the
// snapshot), "computing n of N" while the series compute, a window that fits 1280x720 with no
// legend over data and nothing clipped, one number format per table column, and a QQ plot on log
// axes that reaches the tail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <QComboBox>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QRegularExpression>
#include <QScrollBar>
#include <QTableWidget>
#include <QToolBar>
#include <QTreeWidget>
#include <qcustomplot.h>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/plots/charts.hpp"
#include "gs/kernels/cpu.hpp"
#include "gui/gui_fixtures.hpp"

namespace gs::gui {
namespace {

using testing::qpath;
using testing::TempDir;
using testing::wait_idle;
using testing::write_snapshot;

constexpr std::size_t kFcOffset = 16 * 8 * 3 * 3, kFcSize = 64 * 100;

// Types text into the ratio chooser as a user would, then presses Enter.
void type_ratio(MainWindow& w, const QString& text) {
  QLineEdit* edit = w.ratioBox()->lineEdit();
  ASSERT_NE(edit, nullptr) << "the ratio chooser takes no typed text";
  edit->selectAll();
  QKeyEvent erase(QEvent::KeyPress, Qt::Key_Backspace, Qt::NoModifier);
  QApplication::sendEvent(edit, &erase);
  for (QChar c : text) {
    QKeyEvent press(QEvent::KeyPress, 0, Qt::NoModifier, QString(c));
    QApplication::sendEvent(edit, &press);
  }
  QKeyEvent enter(QEvent::KeyPress, Qt::Key_Return, Qt::NoModifier);
  QApplication::sendEvent(edit, &enter);
  QApplication::processEvents();
}

// fit_report's quality of method at density for fc.weight of one step, computed here.
double direct_quality(std::span<const float> g, const std::string& method, double density) {
  kernels::cpu::CpuPasses passes(g);
  fitting::FitReportOptions options;
  options.densities = {density};
  const fitting::FitReport report = fitting::fit_report(passes, options);
  return find_threshold(report, method, density)->result.quality;
}

TEST(GuiRatio, ATypedRatioIsTheOneSelected) {
  testing::app();
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 3, 61);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(wait_idle(w));

  type_ratio(w, "0.05");
  EXPECT_DOUBLE_EQ(w.density(), 0.05);
  ASSERT_TRUE(wait_idle(w));
  EXPECT_TRUE(w.errorText().isEmpty()) << w.errorText().toStdString();
  EXPECT_EQ(w.ratioBox()->currentText(), "0.05");
  // The table and the series are at 0.05, equal to fit_report's there.
  ASSERT_EQ(w.thresholdTable()->rowCount(), int(fitting::all_methods().size()));
  std::span<const float> last(models[2].data() + kFcOffset, kFcSize);
  for (int row = 0; row < w.thresholdTable()->rowCount(); ++row) {
    if (w.thresholdTable()->item(row, 0)->text() != "sidco-e") continue;
    EXPECT_EQ(w.thresholdTable()->item(row, 3)->text(), QString::number(direct_quality(last, "sidco-e", 0.05), 'f', 3));
  }
  QCPGraph* quality = find_graph(w.qualityPlot(), "sidco-e");
  ASSERT_NE(quality, nullptr) << plot_message(w.qualityPlot()).toStdString();
  ASSERT_EQ(quality->dataCount(), 3);
  EXPECT_DOUBLE_EQ(quality->data()->at(2)->value, direct_quality(last, "sidco-e", 0.05));

  // A listed value typed is that value, not a neighbour of the list.
  type_ratio(w, "0.001");
  EXPECT_DOUBLE_EQ(w.density(), 0.001);
  ASSERT_TRUE(wait_idle(w));

  // Absurd ratios: refused in one line that quotes them; the ratio in effect stays, and shown.
  for (const char* bad : {"abc", "0", "1", "-0.2", "1.5", "nan", ""}) {
    SCOPED_TRACE(bad);
    type_ratio(w, bad);
    if (std::string(bad).empty()) {
      EXPECT_TRUE(w.errorText().contains("not a number")) << w.errorText().toStdString();
    } else {
      EXPECT_TRUE(w.errorText().contains(bad)) << w.errorText().toStdString();
    }
    EXPECT_TRUE(w.errorText().contains("not a number") || w.errorText().contains("outside (0, 1)"))
        << w.errorText().toStdString();
    EXPECT_FALSE(w.errorText().contains('\n'));
    EXPECT_DOUBLE_EQ(w.density(), 0.001);
    EXPECT_EQ(w.ratioBox()->currentText(), "0.001");
    EXPECT_FALSE(w.busy());
  }
}

TEST(GuiRatio, ARatioTheAnalysisLacksIsComputedFromTheSnapshot) {
  testing::app();
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 3, 62);
  analyzer::AnalyzeConfig config;
  config.input = dir / "s.h5";
  config.output = dir / "s.analysis.h5";
  config.densities = {0.01};
  config.quiet = true;
  analyzer::analyze(config);

  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(wait_idle(w));
  ASSERT_EQ(w.analysisFile(), qpath(dir / "s.analysis.h5"));
  // 0.1 is in the chooser (a default) but not in the analysis; 0.05 is in neither.
  for (const double r : {0.1, 0.05}) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(w.selectRatio(r));
    ASSERT_TRUE(wait_idle(w));
    EXPECT_TRUE(w.errorText().isEmpty()) << w.errorText().toStdString();
    ASSERT_NE(w.series(), nullptr);
    EXPECT_NE(w.series()->origin.find("analysis file s.analysis.h5"), std::string::npos);
    EXPECT_NE(w.series()->origin.find("computed from the snapshot"), std::string::npos) << w.series()->origin;
    EXPECT_TRUE(plot_message(w.qualityPlot()).isEmpty()) << plot_message(w.qualityPlot()).toStdString();
    QCPGraph* quality = find_graph(w.qualityPlot(), "sidco-gp");
    ASSERT_NE(quality, nullptr);
    ASSERT_EQ(quality->dataCount(), 3);
    for (int s = 0; s < 3; ++s)
      EXPECT_DOUBLE_EQ(quality->data()->at(s)->value,
                       direct_quality({models[std::size_t(s)].data() + kFcOffset, kFcSize}, "sidco-gp", r));
    EXPECT_NE(find_graph(w.stagesPlot(), "sidco-e"), nullptr);
    EXPECT_NE(find_graph(w.ksPlot(), "gamma"), nullptr);
  }
  // The analysis's own ratio still reads its rows.
  ASSERT_TRUE(w.selectRatio(0.01));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_NE(find_graph(w.qualityPlot(), "sidco-gp"), nullptr);
}

// Every message a plot showed while the window worked (recorded at each replot), and whether its
// axes were hidden then.
struct MessageLog {
  QStringList messages;
  bool axes_with_message = false;
  void watch(QCustomPlot* plot) {
    QObject::connect(plot, &QCustomPlot::afterReplot, plot, [this, plot] {
      const QString m = plot_message(plot);
      if (m.isEmpty()) return;
      messages << m;
      axes_with_message = axes_with_message || plot->xAxis->visible() || plot->yAxis->visible();
    });
  }
};

TEST(GuiSeries, PlotsSayComputingNOfNWhileTheSeriesCompute) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "s.h5", 5, 63);
  MainWindow w;
  w.show();
  MessageLog ks, quality;
  ks.watch(w.ksPlot());
  quality.watch(w.qualityPlot());
  int bar_checks = 0;
  QObject::connect(w.qualityPlot(), &QCustomPlot::afterReplot, w.qualityPlot(), [&] {
    QProgressBar* bar = w.progressBar();
    if (!bar->isVisible() || bar->text().isEmpty()) return;
    ++bar_checks;
    EXPECT_LE(bar->fontMetrics().horizontalAdvance(bar->text()) + 8, bar->width()) << bar->text().toStdString();
  });
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(wait_idle(w));
  const QRegularExpression counted("computing [0-5] of 5 steps");
  for (MessageLog* log : {&ks, &quality}) {
    const QString all = log->messages.join(" | ");
    EXPECT_TRUE(all.contains(counted)) << all.toStdString();
    EXPECT_FALSE(all.contains("no data")) << all.toStdString();
    EXPECT_FALSE(log->axes_with_message) << "a message drawn over axes";
  }
  EXPECT_GT(bar_checks, 0);
  EXPECT_TRUE(plot_message(w.qualityPlot()).isEmpty());
  EXPECT_NE(find_graph(w.qualityPlot(), "sidco-e"), nullptr);

  // Another layer: its series are computing, not the last layer's lines.
  ks.messages.clear();
  ASSERT_TRUE(w.selectScope("conv1.weight"));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_TRUE(ks.messages.join(" | ").contains(counted)) << ks.messages.join(" | ").toStdString();
  EXPECT_EQ(w.series()->scope, "conv1.weight");
}

// A snapshot whose layer names are long, as a transformer's are.
testing::SnapshotSpec long_names() {
  testing::SnapshotSpec spec;
  spec.layers = {{"encoder.layers.11.self_attention.in_proj.weight", {16, 8, 3, 3}},
                 {"encoder.layers.11.mlp.fc.weight", {64, 100}},
                 {"encoder.layers.11.mlp.fc.bias", {64}}};
  return spec;
}

// Each line of text in font fits in width.
bool lines_fit(const QString& text, const QFont& font, int width) {
  const QFontMetrics metrics(font);
  for (const QString& line : text.split('\n'))
    if (metrics.horizontalAdvance(line) > width) return false;
  return true;
}

TEST(GuiLayout, FitsIn1280x720WithNoLegendOverDataAndNothingClipped) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "t.h5", 4, 64, long_names());
  MainWindow w;
  w.show();
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "t.h5")));
  ASSERT_TRUE(w.selectScope("encoder.layers.11.mlp.fc.weight"));
  ASSERT_TRUE(wait_idle(w));
  ASSERT_TRUE(w.errorText().isEmpty()) << w.errorText().toStdString();
  EXPECT_EQ(w.size(), QSize(1280, 720));
  EXPECT_LE(w.minimumSizeHint().width(), 1280);
  EXPECT_LE(w.minimumSizeHint().height(), 720);

  const QCustomPlot* plots[] = {w.histogramPlot(), w.qqPlot(), w.ksPlot(), w.qualityPlot(), w.stagesPlot()};
  for (const QCustomPlot* p : plots) {
    const QString name = p->property("gs_title").toString();
    SCOPED_TRACE(name.toStdString());
    ASSERT_TRUE(plot_message(p).isEmpty()) << plot_message(p).toStdString();
    const QRect data = p->axisRect()->rect();
    ASSERT_TRUE(p->legend->visible());
    const QRect legend = p->legend->outerRect();
    EXPECT_FALSE(legend.intersects(data)) << "legend over the data";
    EXPECT_TRUE(p->rect().contains(legend)) << "legend cut by the plot's edge";
    const QSize needed = p->legend->minimumOuterSizeHint();
    EXPECT_GE(legend.width(), needed.width()) << "legend squeezed";
    EXPECT_GE(legend.height(), needed.height()) << "legend squeezed";
    // Axis labels no longer than their axis, every title line as wide as the plot at most.
    EXPECT_LE(QFontMetrics(p->yAxis->labelFont()).horizontalAdvance(p->yAxis->label()), data.height())
        << p->yAxis->label().toStdString();
    EXPECT_LE(QFontMetrics(p->xAxis->labelFont()).horizontalAdvance(p->xAxis->label()), data.width());
    auto* title = qobject_cast<QCPTextElement*>(p->plotLayout()->element(0, 0));
    ASSERT_NE(title, nullptr);
    EXPECT_TRUE(lines_fit(title->text(), title->font(), p->width())) << title->text().toStdString();
  }

  // The toolbar shows every control (no overflow menu).
  EXPECT_LE(w.selectionBar()->sizeHint().width(), w.selectionBar()->width());
  // Layer names whole, every column in view.
  QTreeWidget* tree = w.layerTree();
  const QAbstractItemView* tree_view = tree;  // sizeHintForColumn is public there
  EXPECT_GE(tree->header()->sectionSize(0), tree_view->sizeHintForColumn(0));
  for (QTreeWidgetItemIterator it(tree); *it; ++it) {
    int depth = 1;  // the root's decoration counts as one level
    for (QTreeWidgetItem* p = (*it)->parent(); p; p = p->parent()) ++depth;
    EXPECT_LE(depth * tree->indentation() + tree->fontMetrics().horizontalAdvance((*it)->text(0)),
              tree->header()->sectionSize(0))
        << (*it)->text(0).toStdString();
  }
  EXPECT_LE(tree->header()->length(), tree->viewport()->width());
  QTableWidget* table = w.thresholdTable();
  const QAbstractItemView* table_view = table;
  for (int c = 0; c < table->columnCount(); ++c)
    EXPECT_GE(table->horizontalHeader()->sectionSize(c), table_view->sizeHintForColumn(c)) << c;
  EXPECT_LE(table->horizontalHeader()->length(), table->viewport()->width());

  // A file that cannot be opened: its message wraps in the banner, the window stays 1280 wide.
  write_snapshot(dir / "s.h5", 2, 65);
  std::filesystem::copy_file(dir / "s.h5", dir / "a-rather-long-name-of-a-truncated-capture-file.h5");
  std::filesystem::resize_file(dir / "a-rather-long-name-of-a-truncated-capture-file.h5", 4096);
  EXPECT_FALSE(w.openSnapshot(qpath(dir / "a-rather-long-name-of-a-truncated-capture-file.h5")));
  QApplication::processEvents();
  QApplication::processEvents();
  QLabel* banner = w.errorBanner();
  ASSERT_TRUE(banner->isVisible());
  EXPECT_EQ(w.width(), 1280);
  EXPECT_LE(banner->heightForWidth(banner->width()), banner->height()) << "banner cut short";
  EXPECT_LE(banner->minimumSizeHint().width(), banner->width());
  QLabel* status = w.statusLabel();
  EXPECT_LE(status->sizeHint().width(), status->width()) << status->text().toStdString();
  EXPECT_EQ(status->toolTip(), w.errorText());  // the whole message is a hover away
}

TEST(GuiLayout, OneNumberFormatPerTableColumn) {
  testing::app();
  TempDir dir;
  write_snapshot(dir / "s.h5", 3, 66);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  const QRegularExpression scientific("^\\d\\.\\d\\de[-+]\\d\\d$"), fixed3("^\\d+\\.\\d{3}$"),
      whole("^\\d{1,3}(" + QRegularExpression::escape(QLocale().groupSeparator()) + "\\d{3})*$");
  bool below = false, above = false;  // thresholds on both sides of 0.01 (format_number's switch)
  for (const char* scope : {"fc.weight", "conv1.weight", "(model)"})
    for (const double r : {0.1, 0.01, 0.001}) {
      ASSERT_TRUE(w.selectScope(scope));
      ASSERT_TRUE(w.selectStep(20));
      ASSERT_TRUE(w.selectRatio(r));
      ASSERT_TRUE(wait_idle(w));
      QTableWidget* t = w.thresholdTable();
      ASSERT_GT(t->rowCount(), 0);
      for (int row = 0; row < t->rowCount(); ++row) {
        const QString threshold = t->item(row, 1)->text();
        EXPECT_TRUE(scientific.match(threshold).hasMatch()) << threshold.toStdString();
        (threshold.toDouble() < 0.01 ? below : above) = true;
        EXPECT_TRUE(whole.match(t->item(row, 2)->text()).hasMatch()) << t->item(row, 2)->text().toStdString();
        EXPECT_TRUE(fixed3.match(t->item(row, 3)->text()).hasMatch()) << t->item(row, 3)->text().toStdString();
        EXPECT_TRUE(QRegularExpression("^\\d+$").match(t->item(row, 4)->text()).hasMatch());
      }
    }
  EXPECT_TRUE(below && above) << "the data should put thresholds on both sides of 0.01";
}

TEST(GuiQQ, LogAxesReachTheTail) {
  testing::app();
  TempDir dir;
  const auto models = write_snapshot(dir / "s.h5", 2, 67);
  MainWindow w;
  ASSERT_TRUE(w.openSnapshot(qpath(dir / "s.h5")));
  ASSERT_TRUE(w.selectScope("fc.weight"));
  ASSERT_TRUE(wait_idle(w));
  EXPECT_EQ(w.qqPlot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_EQ(w.qqPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);

  // The sample: every finite non-zero |g| (fewer than KS's limit), sorted here.
  std::vector<double> x;
  for (std::size_t i = 0; i < kFcSize; ++i)
    if (const float v = models[1][kFcOffset + i]; v != 0.0f) x.push_back(std::abs(double(v)));
  std::sort(x.begin(), x.end());
  const fitting::DistFit* gamma = find_fit(w.view()->report, "gamma");
  ASSERT_NE(gamma, nullptr);
  const fitting::Sid law = sid_from_fit(*gamma);
  int tail = 0;
  double top = 0.0;
  for (const auto& q : gamma->qq) {
    const double pos = q.probability * double(x.size() - 1);
    const auto lo = std::size_t(pos);
    const double sample = x[lo] + (pos - double(lo)) * (x[std::min(lo + 1, x.size() - 1)] - x[lo]);
    EXPECT_NEAR(q.sample, sample, 1e-12 * sample) << q.probability;
    EXPECT_NEAR(q.fitted, fitting::quantile_c(law, 1.0 - q.probability), 1e-6 * q.fitted) << q.probability;
    tail += q.probability >= 0.999;
    top = std::max(top, q.probability);
  }
  EXPECT_GE(top, 1.0 - 1.0 / double(x.size()) - 1e-12);  // the largest values are in the plot
  EXPECT_GE(tail, 3);
  // The plot shows those points.
  QCPGraph* points = find_graph(w.qqPlot(), "gamma");
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->dataCount(), int(gamma->qq.size()));
  EXPECT_LE(w.qqPlot()->yAxis->range().lower, gamma->qq.front().sample);
  EXPECT_GE(w.qqPlot()->yAxis->range().upper, gamma->qq.back().sample);
}

}  // namespace
}  // namespace gs::gui
