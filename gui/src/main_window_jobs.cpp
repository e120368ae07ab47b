// The main window's worker jobs (one view job and one series job at a time, the newest request
// winning), their redraws, and the live-file poll.
#include <cmath>

#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QSlider>
#include <QTableWidget>
#include <QtConcurrent/QtConcurrent>
#include <qcustomplot.h>

#include "elided_label.hpp"
#include "gs/base/error.hpp"
#include "main_window.hpp"
#include "gs/analyzer/plots/charts.hpp"

namespace gs::gui {
namespace {

// A worker's failure in one line. A failure of the device is no property of the data: it says so,
// and how to fit without the device, instead of leaving rows that read as failed fits.
QString failure_text(const std::exception& e) {
  if (dynamic_cast<const DeviceFailure*>(&e) == nullptr) return QString::fromStdString(e.what());
  return QString("device failure: %1 (start gradscope-gui with --backend cpu to fit on the CPU)")
      .arg(QString::fromStdString(e.what()));
}

// One format per column of the table: thresholds span decades across layers and steps, so they
// are always scientific with 3 significant digits.
QString threshold_text(double v) { return std::isfinite(v) ? QString::number(v, 'e', 2) : "n/a"; }

}  // namespace

bool MainWindow::busy() const {
  return view_watcher_.isRunning() || series_watcher_.isRunning() || step_debounce_.isActive() || series_deferred_;
}

void MainWindow::maybeIdle() {
  if (view_watcher_.isRunning() || series_watcher_.isRunning()) return;
  progress_->hide();
  if (all_plots_seconds_ < 0 && view_ && series_) all_plots_seconds_ = double(open_clock_.nsecsElapsed()) * 1e-9;
  if (!step_debounce_.isActive()) emit idle();
}

void MainWindow::updateStepLabel() {
  if (!reader_) return;
  std::int64_t step = 0;
  {
    std::lock_guard lock(hdf5_mutex());
    if (row_ < reader_->steps().size()) step = reader_->steps()[row_].step;
  }
  step_label_->setText(QString(" step %1  (%2 of %3) ").arg(step).arg(row_ + 1).arg(slider_->maximum() + 1));
}

// ---- the selected step ------------------------------------------------------------------------

void MainWindow::requestView() {
  if (!reader_) return;
  ++view_generation_;
  if (!view_watcher_.isRunning()) startView();  // else viewFinished() starts the newest
}

void MainWindow::startView() {
  progress_->setRange(0, 0);
  progress_->setFormat("analysing step");
  progress_->show();
  status_label_->setText(QString("Reading and fitting %1 ...").arg(QString::fromStdString(scope_)));
  auto reader = reader_;
  const std::string scope = scope_;
  const std::size_t row = row_;
  const ViewOptions options = options_;
  const std::uint64_t generation = view_generation_;
  QPointer<MainWindow> self = this;
  view_watcher_.setFuture(QtConcurrent::run([self, reader, scope, row, options, generation] {
    ViewJobResult out;
    out.generation = generation;
    try {
      std::vector<float> g;
      std::int64_t step = 0;
      {
        std::lock_guard lock(hdf5_mutex());
        step = reader->steps().at(row).step;
        g = scope == kModelScope ? reader->read_model(row) : reader->read(row, reader->layer_index(scope));
      }
      // The histogram is one pass: show it while the fits (many passes) run.
      auto view = std::make_shared<VectorView>(histogram_view(g, scope, step, options));
      auto partial = std::make_shared<const VectorView>(*view);
      QMetaObject::invokeMethod(
          self,
          [self, generation, partial] {
            if (self) self->showHistogramFirst(generation, partial);
          },
          Qt::QueuedConnection);
      add_fits(*view, g, options);
      out.view = std::move(view);
    } catch (const std::exception& e) {
      out.error = QString("%1 at row %2: %3").arg(QString::fromStdString(scope)).arg(row).arg(failure_text(e));
    }
    return out;
  }));
}

void MainWindow::showHistogramFirst(std::uint64_t generation, std::shared_ptr<const VectorView> partial) {
  if (generation != view_generation_ || !view_watcher_.isRunning()) return;
  plot_histogram(hist_, *partial, density());
  if (first_plot_seconds_ < 0) first_plot_seconds_ = double(open_clock_.nsecsElapsed()) * 1e-9;
  status_label_->setText(QString("%1, step %2: histogram of %3 elements; fitting ...")
                             .arg(QString::fromStdString(partial->scope))
                             .arg(partial->step)
                             .arg(QLocale().toString(qulonglong(partial->n))));
}

void MainWindow::viewFinished() {
  const ViewJobResult result = view_watcher_.result();
  if (result.generation != view_generation_) {  // superseded while running
    startView();
    return;
  }
  if (!result.error.isEmpty()) {
    view_.reset();
    for (QCustomPlot* p : {hist_, qq_}) show_plot_message(p, "no data (see the message above)");
    table_->setRowCount(0);
    showError(result.error);
  } else {
    clearError();
    view_ = result.view;
    redrawView();
    if (first_plot_seconds_ < 0) first_plot_seconds_ = double(open_clock_.nsecsElapsed()) * 1e-9;
    status_label_->setText(QString("%1, step %2: %3 elements (%4 zero or non-finite), analysed in %5 s")
                               .arg(QString::fromStdString(view_->scope))
                               .arg(view_->step)
                               .arg(QLocale().toString(qulonglong(view_->n)))
                               .arg(QLocale().toString(qulonglong(view_->report.excluded)))
                               .arg(view_->seconds, 0, 'f', 2));
    if (series_) redrawSeries();  // moves the current-step markers
  }
  if (series_deferred_) {
    series_deferred_ = false;
    startSeries();
  }
  maybeIdle();
}

void MainWindow::redrawView() {
  if (!view_) return;
  plot_histogram(hist_, *view_, density());
  plot_qq(qq_, *view_, dist_box_->currentText().toStdString());
  fillTable();
  updateCaptions();
}

void MainWindow::fillTable() {
  table_->setRowCount(0);
  if (!view_) return;
  const double r = density();
  for (const auto& entry : view_->report.thresholds) {
    const auto& t = entry.result;
    if (std::abs(t.density - r) > 1e-9 * r) continue;
    const int row = table_->rowCount();
    table_->insertRow(row);
    auto cell = [&](int col, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(col == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(row, col, item);
      return item;
    };
    cell(0, QString::fromStdString(t.method))->setForeground(method_color(t.method));
    if (!entry.error.empty()) {
      cell(1, "failed")->setToolTip(QString::fromStdString(entry.error));
      continue;
    }
    cell(1, threshold_text(t.threshold));
    cell(2, QLocale().toString(qulonglong(t.selected)));
    QTableWidgetItem* q = cell(3, QString::number(t.quality, 'f', 3));
    if (double(view_->n) * r < 1.0) {
      // A target below one element: methods still keep one, so achieved/target measures rounding.
      q->setForeground(QColor(150, 150, 150));
      q->setToolTip(QString("No meaning here: ratio x n = %1 < 1, a target of less than one "
                            "element (exact top-k would select none; every method keeps one)")
                        .arg(double(view_->n) * r, 0, 'g', 3));
    } else {
      q->setForeground(std::abs(t.quality - 1.0) <= 0.2 ? QColor(20, 120, 20) : QColor(180, 20, 20));
    }
    cell(4, QString::number(t.stages));
  }
  table_->resizeRowsToContents();
  fitSelectionPane();
}

// ---- over training ----------------------------------------------------------------------------

void MainWindow::requestSeries() {
  if (!reader_ || !source_) return;
  ++series_generation_;
  if (series_watcher_.isRunning()) {
    *series_cancel_ = true;  // seriesFinished() starts the newest
    return;
  }
  if (view_watcher_.isRunning()) {  // viewFinished() starts it
    series_deferred_ = true;
    showSeriesProgress(0, 0);
    return;
  }
  startSeries();
}

void MainWindow::startSeries() {
  progress_->show();
  series_awaited_ = true;
  series_cancel_ = std::make_shared<std::atomic<bool>>(false);
  auto source = source_;
  auto cancel = series_cancel_;
  const std::string scope = scope_;
  const double shown = density();
  const std::uint64_t generation = series_generation_;
  QPointer<MainWindow> self = this;
  auto progress = [self, generation](int done, int total) {
    QMetaObject::invokeMethod(
        self,
        [self, generation, done, total] {
          if (self && generation == self->series_generation_) self->showSeriesProgress(done, total);
        },
        Qt::QueuedConnection);
  };
  series_watcher_.setFuture(QtConcurrent::run([source, cancel, scope, shown, generation, progress] {
    SeriesJobResult out;
    out.generation = generation;
    try {
      out.series = std::make_shared<const TrainingSeries>(source->load(scope, shown, progress, *cancel));
    } catch (const std::exception& e) {
      out.error = QString("over training (%1): %2").arg(QString::fromStdString(scope), failure_text(e));
    }
    return out;
  }));
  showSeriesProgress(0, 0);
}

void MainWindow::seriesFinished() {
  series_awaited_ = false;
  const SeriesJobResult result = series_watcher_.result();
  if (result.generation != series_generation_) {
    startSeries();
    return;
  }
  if (!result.error.isEmpty()) {
    series_.reset();
    for (QCustomPlot* p : {ks_, quality_, stages_}) show_plot_message(p, "no series");
    showError(result.error);
  } else {
    series_ = result.series;
    redrawSeries();
    if (!view_watcher_.isRunning() && error_.isEmpty())
      status_label_->setText(status_label_->text().section("  |  ", 0, 0) +
                             "  |  over training: " + QString::fromStdString(series_->origin));
  }
  maybeIdle();
}

bool MainWindow::seriesShowable() const { return series_ && series_->scope == scope_; }

bool MainWindow::seriesHasDensity(double d) const {
  return series_ && std::any_of(series_->methods.begin(), series_->methods.end(),
                                [d](const MethodPoint& p) { return std::abs(p.density - d) <= 1e-9 * d; });
}

void MainWindow::showSeriesProgress(int done, int total) {
  series_done_ = done;
  series_total_ = total;
  if (!series_awaited_ && !series_deferred_) return;
  if (total > 0) {
    progress_->setRange(0, total);
    progress_->setValue(done);
    progress_->setFormat("over training %v of %m");
  }
  // The plots that wait for this job say so, instead of an old scope's or ratio's lines.
  const QString count = total > 0 ? QString("computing %1 of %2 steps").arg(done).arg(total)
                                  : QString("computing (waiting for the step's fits)");
  if (!seriesShowable()) show_plot_message(ks_, "over training: " + count);
  if (!seriesShowable() || !seriesHasDensity(density())) {
    const QString text = QString("ratio %1 over training: %2").arg(ratio_box_->currentText(), count);
    show_plot_message(quality_, text);
    show_plot_message(stages_, text);
  }
  updateCaptions();
}

void MainWindow::redrawSeries() {
  const bool pending = series_awaited_ || series_deferred_;
  if (!seriesShowable()) {
    if (pending) showSeriesProgress(series_done_, series_total_);
    return;
  }
  const std::int64_t step = view_ ? view_->step : (series_->steps.empty() ? 0 : series_->steps.back());
  plot_ks(ks_, *series_, step);
  if (pending && !seriesHasDensity(density())) {
    showSeriesProgress(series_done_, series_total_);
  } else {
    plot_quality(quality_, *series_, density(), step);
    plot_stages(stages_, *series_, density(), step);
  }
  ks_->setToolTip(QString::fromStdString("Source: " + series_->origin));
  updateCaptions();
}

// ---- live files -------------------------------------------------------------------------------

void MainWindow::setLive(bool on) {
  if (live_action_->isChecked() != on) live_action_->setChecked(on);  // re-enters once
  if (on)
    live_timer_.start();
  else
    live_timer_.stop();
}

void MainWindow::pollLive() {
  if (!reader_) return;
  std::size_t steps = 0;
  {
    // A worker holding the lock means a read is under way: try again on the next tick.
    std::unique_lock lock(hdf5_mutex(), std::try_to_lock);
    if (!lock.owns_lock()) return;
    try {
      steps = reader_->refresh();
    } catch (const std::exception& e) {
      lock.unlock();
      showError(QString("Following the live file failed: %1").arg(e.what()));
      setLive(false);
      return;
    }
  }
  const int old_max = slider_->maximum();
  if (int(steps) - 1 <= old_max) return;
  const bool at_end = slider_->value() == old_max;
  slider_->setMaximum(int(steps) - 1);
  if (at_end) {
    const QSignalBlocker block(slider_);
    slider_->setValue(slider_->maximum());
    row_ = std::size_t(slider_->maximum());
    requestView();
  }
  updateStepLabel();
  requestSeries();
}

}  // namespace gs::gui
