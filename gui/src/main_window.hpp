#pragma once
// The gradscope-gui main window: a tree of layers (and the whole model), a step slider, a density
// chooser and a SID chooser drive five plots (histogram with fits and thresholds, QQ, and KS,
// estimation quality and SIDCo stages over training) and a threshold table. Reading and fitting run
// on worker threads (QtConcurrent) with a progress bar; errors (gs::Error and any other exception
// from a worker) are shown in the window, never thrown out of it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QMainWindow>
#include <QTimer>

#include "exports.hpp"
#include "gs/data/snapshot.hpp"
#include "training_source.hpp"

class QComboBox;
class QCustomPlot;
class QLabel;
class QProgressBar;
class QSlider;
class QSplitter;
class QTableWidget;
class QToolBar;
class QTreeWidget;
class QAction;

namespace gs::gui {

class ElidedLabel;

// The ratio typed into the chooser: a density in (0, 1), or nullopt with *error saying what is
// wrong in one line.
std::optional<double> parse_ratio(const QString& text, QString* error);

struct ViewJobResult {
  std::uint64_t generation = 0;
  std::shared_ptr<const VectorView> view;
  QString error;
};
struct SeriesJobResult {
  std::uint64_t generation = 0;
  std::shared_ptr<const TrainingSeries> series;
  QString error;
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(ViewOptions options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a snapshot (and the analysis file given, or the one beside it). On failure the message
  // is shown in the window and returned false; the file shown before stays open and shown.
  bool openSnapshot(const QString& path, const QString& analysis = {});
  // Reads the series over training from an analysis file of the open snapshot. False (the message
  // shown, the series keeping their source) when it cannot be read or is no analysis of the
  // snapshot (another model, other layers or another recording: match_analysis).
  bool openAnalysis(const QString& path);
  QString analysisFile() const { return analysis_file_; }    // in use; empty: none
  QString analysisNote() const { return analysis_note_; }    // how its steps differ, or empty
  QString analysisError() const { return analysis_error_; }  // why the last one was refused
  // Selections; false (with the message shown) when the scope, step or density is not there.
  bool selectScope(const QString& scope);       // a layer name or "(model)"
  bool selectStep(std::int64_t training_step);  // a recorded step
  // Added to the chooser when new; a density the series lack (a new one, or one the analysis
  // file lacks) is computed from the snapshot.
  bool selectRatio(double density);
  void setLive(bool on);  // follow a file that is still being written

  // What is shown, for exported file names and titles (the view's scope and step once drawn,
  // else the selection's).
  ExportContext exportContext() const;
  // The files exportPlots / exportCsv write into dir (existing or not).
  QStringList plotExportPaths(const QString& dir) const;
  QStringList csvExportPaths(const QString& dir) const;
  // Write every plot (PNG and PDF) / the CSV files into dir. A file there is replaced only when
  // replace is true; otherwise false with the message shown (as for any failure).
  bool exportPlots(const QString& dir, bool replace);
  bool exportCsv(const QString& dir, bool replace);

  bool busy() const;  // a worker is running or a request waits
  QString errorText() const;
  double density() const;
  std::string scope() const { return scope_; }
  const VectorView* view() const { return view_.get(); }
  const TrainingSeries* series() const { return series_.get(); }
  double firstPlotSeconds() const { return first_plot_seconds_; }
  double allPlotsSeconds() const { return all_plots_seconds_; }
  std::size_t stepCount() const;

  QCustomPlot* histogramPlot() const { return hist_; }
  QCustomPlot* qqPlot() const { return qq_; }
  QCustomPlot* ksPlot() const { return ks_; }
  QCustomPlot* qualityPlot() const { return quality_; }
  QCustomPlot* stagesPlot() const { return stages_; }
  QTableWidget* thresholdTable() const { return table_; }
  // The selection widgets and the message places, for tests of the layout.
  QComboBox* ratioBox() const { return ratio_box_; }
  QTreeWidget* layerTree() const { return tree_; }
  QToolBar* selectionBar() const { return toolbar_; }
  QLabel* errorBanner() const { return error_label_; }
  QLabel* statusLabel() const;
  QProgressBar* progressBar() const { return progress_; }

 signals:
  void idle();                          // every requested plot is drawn
  void failed(const QString& message);  // an error was shown

 private:
  void buildUi();
  void buildToolbar();
  QWidget* buildSelectionPane();
  QWidget* buildPlotPane();
  void connectSelection();
  void buildMenus();
  void showError(const QString& message);
  void clearError();
  void fillTree();
  void fillRatios(const std::vector<double>& densities);
  void applyTypedRatio();   // the text typed into the ratio chooser
  void fitSelectionPane();  // the left pane as wide as the layer names and the table need
  void requestView();
  void requestSeries();
  void startView();
  void startSeries();
  void viewFinished();
  void seriesFinished();
  void redrawView();
  void showHistogramFirst(std::uint64_t generation, std::shared_ptr<const VectorView> partial);
  void redrawSeries();
  bool seriesShowable() const;  // series_ is of the scope shown
  bool seriesHasDensity(double density) const;
  // "computing n of N" in the plots over training that wait for the series job.
  void showSeriesProgress(int done, int total);
  void fillTable();
  void updateStepLabel();
  void pollLive();
  void exportPlotDialog(QCustomPlot* plot);
  void exportAllDialog(bool csv);
  bool mayReplace(const QStringList& paths);  // asks when some exist
  void updateCaptions();                      // titles and suggested export names follow what is shown
  void maybeIdle();
  std::vector<QCustomPlot*> plots() const;

  ViewOptions options_;
  std::shared_ptr<data::SnapshotReader> reader_;
  std::shared_ptr<TrainingSource> source_;
  std::string scope_ = kModelScope;
  std::size_t row_ = 0;
  std::shared_ptr<const VectorView> view_;
  std::shared_ptr<const TrainingSeries> series_;

  std::uint64_t view_generation_ = 0, series_generation_ = 0;
  QFutureWatcher<ViewJobResult> view_watcher_;
  QFutureWatcher<SeriesJobResult> series_watcher_;
  std::shared_ptr<std::atomic<bool>> series_cancel_;
  bool series_deferred_ = false;            // waits for the view job: the first plot comes first
  int series_done_ = 0, series_total_ = 0;  // the running series job's progress
  // From startSeries() to seriesFinished(): the job's progress, queued before its end, is shown
  // even when the worker is already done (isRunning() would drop it).
  bool series_awaited_ = false;
  QTimer step_debounce_, live_timer_;
  QElapsedTimer open_clock_;
  double first_plot_seconds_ = -1.0, all_plots_seconds_ = -1.0;
  QString error_;
  QString path_, analysis_file_, analysis_note_, analysis_error_;

  QToolBar* toolbar_ = nullptr;
  QSplitter* split_ = nullptr;
  QTreeWidget* tree_ = nullptr;
  QSlider* slider_ = nullptr;
  QLabel* step_label_ = nullptr;
  QComboBox* ratio_box_ = nullptr;
  QComboBox* dist_box_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* error_label_ = nullptr;
  ElidedLabel* status_label_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QAction* live_action_ = nullptr;
  QCustomPlot *hist_ = nullptr, *qq_ = nullptr, *ks_ = nullptr, *quality_ = nullptr, *stages_ = nullptr;
};

}  // namespace gs::gui
