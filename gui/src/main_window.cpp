// Construction, menus and selections of the main window; the worker jobs and redraws are in
// main_window_jobs.cpp.
#include "main_window.hpp"

#include <cmath>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QSlider>
#include <QStyle>
#include <QScrollBar>
#include <QSplitter>
#include <QStatusBar>
#include <QTableWidget>
#include <QToolBar>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "gs/analyzer/plots/charts.hpp"
#include "gs/base/error.hpp"
#include "elided_label.hpp"
#include "exports.hpp"
#include "plot_interaction.hpp"

namespace gs::gui {

MainWindow::MainWindow(ViewOptions options, QWidget* parent) : QMainWindow(parent), options_(std::move(options)) {
  setWindowTitle("gradscope");
  buildUi();
  buildMenus();
  step_debounce_.setSingleShot(true);
  step_debounce_.setInterval(120);  // one job per pause while the slider is dragged
  connect(&step_debounce_, &QTimer::timeout, this, [this] { requestView(); });
  live_timer_.setInterval(1000);
  connect(&live_timer_, &QTimer::timeout, this, [this] { pollLive(); });
  connect(&view_watcher_, &QFutureWatcher<ViewJobResult>::finished, this, [this] { viewFinished(); });
  connect(&series_watcher_, &QFutureWatcher<SeriesJobResult>::finished, this, [this] { seriesFinished(); });
  // Fits a 1366x768 laptop screen and a 720p capture; docs/gui.md's screenshot is this size.
  resize(1280, 720);
}

MainWindow::~MainWindow() {
  if (series_cancel_) *series_cancel_ = true;
  view_watcher_.waitForFinished();
  series_watcher_.waitForFinished();
}

void MainWindow::buildUi() {
  buildToolbar();
  split_ = new QSplitter(Qt::Horizontal);
  split_->addWidget(buildSelectionPane());
  split_->addWidget(buildPlotPane());
  split_->setStretchFactor(0, 0);
  split_->setStretchFactor(1, 1);
  split_->setSizes({300, 980});
  setCentralWidget(split_);

  status_label_ = new ElidedLabel("Open a snapshot file (File > Open)");
  statusBar()->addWidget(status_label_, 1);
  progress_ = new QProgressBar;
  progress_->setTextVisible(true);
  // Wide enough for its longest text: the style draws it inside the bar and cuts what overflows.
  progress_->setFixedWidth(progress_->fontMetrics().horizontalAdvance("over training 9999 of 9999") + 40);
  progress_->hide();
  statusBar()->addPermanentWidget(progress_);

  for (QCustomPlot* p : plots()) show_plot_message(p, "Open a snapshot file (File > Open)");
  connectSelection();
}

// The step slider, the ratio and the QQ law.
void MainWindow::buildToolbar() {
  auto* toolbar = toolbar_ = addToolBar("Selection");
  toolbar->setMovable(false);
  toolbar->addWidget(new QLabel(" Step "));
  slider_ = new QSlider(Qt::Horizontal);
  slider_->setMinimumWidth(300);
  slider_->setRange(0, 0);
  slider_->setToolTip("Recorded step (PageUp/PageDown, Home/End)");
  toolbar->addWidget(slider_);
  step_label_ = new QLabel(" no file ");
  step_label_->setMinimumWidth(step_label_->fontMetrics().horizontalAdvance(" step 999999999  (9999 of 9999) "));
  toolbar->addWidget(step_label_);
  toolbar->addSeparator();
  toolbar->addWidget(new QLabel(" Ratio "));
  ratio_box_ = new QComboBox;
  // Any density may be typed (Enter applies it); the list holds the analysis's and those used.
  // No completer: it would turn a typed 0.0 into the listed 0.01.
  ratio_box_->setEditable(true);
  ratio_box_->setInsertPolicy(QComboBox::NoInsert);
  ratio_box_->setCompleter(nullptr);
  ratio_box_->setMinimumContentsLength(8);
  ratio_box_->setToolTip(
      "Target density: fraction of elements the thresholds keep; type any value in (0, 1) and "
      "press Enter");
  toolbar->addWidget(ratio_box_);
  toolbar->addSeparator();
  toolbar->addWidget(new QLabel(" QQ law "));
  dist_box_ = new QComboBox;
  for (const auto& d : options_.report.dists) dist_box_->addItem(QString::fromStdString(d));
  if (int i = dist_box_->findText("gamma"); i >= 0) dist_box_->setCurrentIndex(i);
  toolbar->addWidget(dist_box_);
}

// The layer tree above the methods' table.
QWidget* MainWindow::buildSelectionPane() {
  tree_ = new QTreeWidget;
  tree_->setColumnCount(3);
  tree_->setHeaderLabels({"Layer", "Shape", "Elements"});
  tree_->setRootIsDecorated(true);
  // Every column as wide as its contents; fitSelectionPane() widens the pane to show them all.
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->header()->setStretchLastSection(false);

  table_ = new QTableWidget(0, 5);
  table_->setHorizontalHeaderLabels({"Method", "Threshold", "Selected", "Quality", "Stages"});
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip("Every method at the chosen ratio; quality = achieved / target density");

  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(tree_);
  left->addWidget(table_);
  left->setStretchFactor(0, 3);
  left->setStretchFactor(1, 2);
  return left;
}

// The error banner above the five plots.
QWidget* MainWindow::buildPlotPane() {
  hist_ = new QCustomPlot;
  qq_ = new QCustomPlot;
  ks_ = new QCustomPlot;
  quality_ = new QCustomPlot;
  stages_ = new QCustomPlot;
  // Every legend above its axes: inside them it would cover data (the histogram's tail, where the
  // thresholds are); setup_plot gives it as many columns as the width holds.
  setup_plot(hist_, "Histogram of |g| with fitted SIDs and thresholds", LegendPlace::top);
  setup_plot(qq_, "QQ plot", LegendPlace::top);
  setup_plot(ks_, "KS statistic over training", LegendPlace::top);
  setup_plot(quality_, "Estimation quality over training", LegendPlace::top);
  setup_plot(stages_, "SIDCo stages over training", LegendPlace::top);
  for (QCustomPlot* p : plots()) make_interactive(p);

  error_label_ = new QLabel;
  error_label_->setWordWrap(true);
  error_label_->setStyleSheet(
      "QLabel { background: #fde8e8; color: #8a1010; border: 1px solid #e0a0a0; padding: 6px; }");
  error_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_label_->hide();

  auto* grid = new QGridLayout;
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(hist_, 0, 0, 1, 2);
  grid->addWidget(qq_, 0, 2);
  grid->addWidget(ks_, 1, 0);
  grid->addWidget(quality_, 1, 1);
  grid->addWidget(stages_, 1, 2);
  // Equal rows: at 1280x720 a lower row gets little more than its titles, legend and axes.
  grid->setRowStretch(0, 1);
  grid->setRowStretch(1, 1);
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);
  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(error_label_);
  right_layout->addLayout(grid, 1);
  return right;
}

// A new layer, step, ratio or law redraws what depends on it.
void MainWindow::connectSelection() {
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    if (!item) return;
    const std::string scope = item->data(0, Qt::UserRole).toString().toStdString();
    if (scope.empty() || scope == scope_) return;
    scope_ = scope;
    requestView();
    requestSeries();
  });
  connect(slider_, &QSlider::valueChanged, this, [this](int value) {
    if (std::size_t(value) == row_) return;
    row_ = std::size_t(value);
    updateStepLabel();
    step_debounce_.start();
  });
  connect(ratio_box_, &QComboBox::currentIndexChanged, this, [this] {
    redrawView();
    redrawSeries();
    // A density the series lack (one the analysis file did not use) is computed from the snapshot.
    if (reader_ && series_ && !seriesHasDensity(density())) requestSeries();
  });
  connect(ratio_box_->lineEdit(), &QLineEdit::editingFinished, this, [this] { applyTypedRatio(); });
  connect(dist_box_, &QComboBox::currentIndexChanged, this, [this] {
    if (view_) plot_qq(qq_, *view_, dist_box_->currentText().toStdString());
  });
}

std::vector<QCustomPlot*> MainWindow::plots() const { return {hist_, qq_, ks_, quality_, stages_}; }

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open snapshot...", QKeySequence::Open, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open snapshot", QString(), "HDF5 snapshots (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) openSnapshot(path);
  });
  file->addAction("Open &analysis file...", QKeySequence(Qt::CTRL | Qt::Key_A), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Open analysis file", QString(),
                                                      "Analysis files (*.h5 *.hdf5);;All files (*)");
    if (!path.isEmpty()) openAnalysis(path);
  });
  file->addSeparator();
  QMenu* exports = file->addMenu("&Export plot");
  const std::pair<const char*, QCustomPlot*> named[] = {{"Histogram", hist_},
                                                        {"QQ plot", qq_},
                                                        {"KS over training", ks_},
                                                        {"Quality over training", quality_},
                                                        {"SIDCo stages", stages_}};
  for (const auto& [name, plot] : named) {
    QCustomPlot* p = plot;
    exports->addAction(QString(name) + "...", this, [this, p] { exportPlotDialog(p); });
  }
  file->addAction("Export all plots to &folder...", QKeySequence(Qt::CTRL | Qt::Key_E), this,
                  [this] { exportAllDialog(false); });
  file->addAction("Export table and series as &CSV to folder...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this,
                  [this] { exportAllDialog(true); });
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, [this] { close(); });

  QMenu* view = menuBar()->addMenu("&View");
  live_action_ = view->addAction("Follow &live file");
  live_action_->setCheckable(true);
  live_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  connect(live_action_, &QAction::toggled, this, [this](bool on) { setLive(on); });
  view->addAction("&Reset all views", QKeySequence(Qt::CTRL | Qt::Key_0), this, [this] {
    for (QCustomPlot* p : plots()) reset_view(p);
  });
}

QLabel* MainWindow::statusLabel() const { return status_label_; }

std::optional<double> parse_ratio(const QString& text, QString* error) {
  const QString t = text.trimmed();
  bool ok = false;
  double d = QLocale::c().toDouble(t, &ok);  // 0.05, 5e-2
  if (!ok) d = QLocale().toDouble(t, &ok);   // 0,05 where that is the decimal point
  if (!ok || !std::isfinite(d)) {
    *error = QString("Ratio '%1' is not a number: type a target density such as 0.01").arg(t);
    return std::nullopt;
  }
  if (!(d > 0.0 && d < 1.0)) {
    *error = QString("Ratio %1 is outside (0, 1): type a target density such as 0.01").arg(t);
    return std::nullopt;
  }
  return d;
}

void MainWindow::applyTypedRatio() {
  if (ratio_box_->count() == 0) return;
  QString error;
  const std::optional<double> typed = parse_ratio(ratio_box_->currentText(), &error);
  if (!typed) {
    showError(error);
    // The box shows the ratio in effect again; the message quotes what was typed.
    ratio_box_->setEditText(ratio_box_->itemText(ratio_box_->currentIndex()));
    return;
  }
  if (std::abs(*typed - density()) <= 1e-9 * *typed) {
    ratio_box_->setEditText(ratio_box_->itemText(ratio_box_->currentIndex()));
    return;
  }
  selectRatio(*typed);
}

void MainWindow::fitSelectionPane() {
  // Columns as their contents and headers need, the frame, and room for a vertical scroll bar.
  auto needed = [this](QAbstractItemView* view, QHeaderView* header, int columns) {
    int w = 2 * view->frameWidth() + style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 8;
    for (int c = 0; c < columns; ++c) w += std::max(view->sizeHintForColumn(c), header->sectionSizeHint(c));
    return w;
  };
  const int want = std::max(needed(tree_, tree_->header(), tree_->columnCount()),
                            needed(table_, table_->horizontalHeader(), table_->columnCount()));
  const QList<int> sizes = split_->sizes();
  const int total = sizes.size() == 2 && sizes[0] + sizes[1] > 0 ? sizes[0] + sizes[1] : width();
  // The plots keep at least 55% of the width; a user's wider pane is kept.
  const int left = std::min(want, total * 45 / 100);
  if (sizes.size() == 2 && sizes[0] >= left) return;
  split_->setSizes({left, total - left});
}

void MainWindow::showError(const QString& message) {
  error_ = message;
  error_label_->setText(message);
  error_label_->show();
  status_label_->setText(message);
  emit failed(message);
}

void MainWindow::clearError() {
  error_.clear();
  error_label_->setText(analysis_error_);
  error_label_->setVisible(!analysis_error_.isEmpty());
}

QString MainWindow::errorText() const { return error_; }

double MainWindow::density() const { return ratio_box_->count() ? ratio_box_->currentData().toDouble() : 0.0; }

std::size_t MainWindow::stepCount() const { return std::size_t(slider_->maximum()) + (reader_ ? 1 : 0); }

bool MainWindow::openSnapshot(const QString& path, const QString& analysis) {
  // Open the new file before letting go of the one shown: a file that cannot be opened leaves the
  // window as it was, with the message.
  std::shared_ptr<data::SnapshotReader> reader;
  try {
    std::lock_guard lock(hdf5_mutex());
    reader = std::make_shared<data::SnapshotReader>(path.toStdString());
    if (reader->step_count() == 0)
      throw Error("'" + path.toStdString() +
                  "' holds no recorded step yet (a writer may still be starting): try "
                  "View > Follow live file, or open it again later");
  } catch (const std::exception& e) {
    showError(QString("Cannot open %1: %2%3")
                  .arg(path, e.what(), reader_ ? " (still showing " + QFileInfo(path_).fileName() + ")" : ""));
    return false;
  }
  if (series_cancel_) *series_cancel_ = true;
  view_watcher_.waitForFinished();
  series_watcher_.waitForFinished();
  series_deferred_ = false;
  clearError();
  open_clock_.start();
  first_plot_seconds_ = all_plots_seconds_ = -1.0;
  reader_ = reader;
  path_ = path;
  analysis_file_.clear();
  analysis_note_.clear();
  analysis_error_.clear();
  setWindowTitle("gradscope - " + QFileInfo(path).fileName());
  view_.reset();
  series_.reset();
  fillRatios(options_.report.densities);
  fillTree();
  {
    const QSignalBlocker block(slider_);
    slider_->setRange(0, int(reader_->step_count()) - 1);
    slider_->setValue(slider_->maximum());
    row_ = std::size_t(slider_->maximum());
  }
  updateStepLabel();
  QString analysis_path = analysis;
  if (analysis_path.isEmpty()) {
    const auto beside = find_analysis_beside(path.toStdString());
    if (!beside.empty()) analysis_path = QString::fromStdString(beside.string());
  }
  source_ = make_training_source(reader_, {}, options_.report, options_.backend);
  requestView();
  // A refused analysis file leaves the series computed from the snapshot (the message says why).
  if (analysis_path.isEmpty())
    requestSeries();
  else
    openAnalysis(analysis_path);  // requests the series, from the snapshot if it refuses the file
  return true;
}

bool MainWindow::openAnalysis(const QString& path) {
  if (!reader_) {
    showError("Open a snapshot first: the analysis file only holds its results");
    return false;
  }
  if (series_cancel_) *series_cancel_ = true;
  series_watcher_.waitForFinished();
  try {
    auto source = make_training_source(reader_, path.toStdString(), options_.report, options_.backend);
    const auto& analysis = static_cast<AnalysisTrainingSource&>(*source);
    const std::vector<double> densities = analysis.densities();
    analysis_note_ = QString::fromStdString(analysis.note());
    source_ = std::move(source);
    analysis_file_ = path;
    const double keep = density();
    std::vector<double> all = options_.report.densities;
    for (double r : densities)
      if (std::none_of(all.begin(), all.end(), [r](double a) { return std::abs(a - r) <= 1e-9 * r; })) all.push_back(r);
    options_.report.densities = all;
    fillRatios(all);
    if (keep > 0) selectRatio(keep);
    if (!analysis_note_.isEmpty())
      status_label_->setText("Analysis file " + QFileInfo(path).fileName() + " " + analysis_note_);
  } catch (const std::exception& e) {
    // Kept in the banner until another file is opened: the plots would not say it.
    analysis_error_ = QString("Cannot use analysis file %1: %2 (the series over training come from the %3)")
                          .arg(path, e.what(),
                               analysis_file_.isEmpty() ? QString("snapshot")
                                                        : "analysis file " + QFileInfo(analysis_file_).fileName());
    showError(analysis_error_);
    requestSeries();  // the cancelled series, from the source kept
    return false;
  }
  analysis_error_.clear();
  requestSeries();
  return true;
}

void MainWindow::fillRatios(const std::vector<double>& densities) {
  const QSignalBlocker block(ratio_box_);
  const double keep = density();
  ratio_box_->clear();
  std::vector<double> sorted = densities;
  std::sort(sorted.rbegin(), sorted.rend());
  for (double r : sorted) ratio_box_->addItem(QString::number(r, 'g', 6), r);
  int index = 0;
  for (int i = 0; i < ratio_box_->count(); ++i) {
    const double r = ratio_box_->itemData(i).toDouble();
    if (keep > 0 ? std::abs(r - keep) <= 1e-9 * keep : std::abs(r - 0.01) < 1e-12) index = i;
  }
  ratio_box_->setCurrentIndex(index);
}

void MainWindow::fillTree() {
  const QSignalBlocker block(tree_);
  tree_->clear();
  auto* model = new QTreeWidgetItem(tree_);
  model->setText(0, "whole model");
  model->setData(0, Qt::UserRole, QString(kModelScope));
  model->setText(1, QString("%1 layers").arg(reader_->layers().size()));
  model->setText(2, QLocale().toString(qlonglong(reader_->total_numel())));
  for (const auto& layer : reader_->layers()) {
    auto* item = new QTreeWidgetItem(model);
    item->setText(0, QString::fromStdString(layer.name));
    item->setData(0, Qt::UserRole, QString::fromStdString(layer.name));
    QStringList dims;
    for (auto d : layer.shape) dims << QString::number(d);
    item->setText(1, "[" + dims.join(", ") + "]");
    item->setText(2, QLocale().toString(qlonglong(layer.numel())));
    item->setTextAlignment(2, Qt::AlignRight | Qt::AlignVCenter);
    if (layer.name == scope_) tree_->setCurrentItem(item);
  }
  model->setExpanded(true);
  if (!tree_->currentItem()) {
    scope_ = kModelScope;
    tree_->setCurrentItem(model);
  }
  fitSelectionPane();
}

bool MainWindow::selectScope(const QString& scope) {
  const bool model = scope == kModelScope || scope == "model";
  QTreeWidgetItemIterator it(tree_);
  for (; *it; ++it) {
    const QString s = (*it)->data(0, Qt::UserRole).toString();
    if (s == scope || (model && s == kModelScope)) {
      tree_->setCurrentItem(*it);
      return true;
    }
  }
  QStringList names;
  if (reader_)
    for (const auto& l : reader_->layers()) names << QString::fromStdString(l.name);
  showError(QString("No layer '%1' in the snapshot; layers: %2 (or \"(model)\" for the whole model)")
                .arg(scope, names.join(", ")));
  return false;
}

bool MainWindow::selectStep(std::int64_t training_step) {
  if (!reader_) return false;
  std::size_t row = 0;
  try {
    std::lock_guard lock(hdf5_mutex());
    row = reader_->step_index(training_step);
  } catch (const std::exception& e) {
    showError(e.what());
    return false;
  }
  slider_->setValue(int(row));
  if (step_debounce_.isActive()) {  // a programmatic choice is applied at once
    step_debounce_.stop();
    requestView();
  }
  return true;
}

bool MainWindow::selectRatio(double density) {
  if (!(density > 0.0 && density < 1.0)) {
    showError(QString("Ratio %1 is outside (0, 1): give a target density such as 0.01").arg(density));
    return false;
  }
  for (int i = 0; i < ratio_box_->count(); ++i)
    if (std::abs(ratio_box_->itemData(i).toDouble() - density) <= 1e-9 * density) {
      ratio_box_->setCurrentIndex(i);
      return true;
    }
  // A new density needs fresh thresholds: the step's view again, and the series at it (the
  // source computes only that density, from the snapshot, keeping what it has).
  options_.report.densities.push_back(density);
  {
    const QSignalBlocker block(ratio_box_);
    fillRatios(options_.report.densities);
    ratio_box_->setCurrentIndex(ratio_box_->findData(density));
  }
  if (reader_) {
    requestView();
    requestSeries();
  }
  redrawView();
  redrawSeries();
  return true;
}

}  // namespace gs::gui
