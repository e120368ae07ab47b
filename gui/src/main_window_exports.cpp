// The main window's exports: plots (PNG and PDF) and CSV into a folder, their names and titles
// from what is shown, and asking before a file is replaced.
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMessageBox>
#include <qcustomplot.h>

#include "elided_label.hpp"
#include "gs/analyzer/plots/charts.hpp"
#include "main_window.hpp"

namespace gs::gui {

void MainWindow::exportPlotDialog(QCustomPlot* plot) {
  // The dialog asks before it replaces a file.
  const QString suggested = plot->property("gs_export_name").toString();
  const QString path =
      QFileDialog::getSaveFileName(this, "Export plot", (suggested.isEmpty() ? QString("plot") : suggested) + ".png",
                                   "PNG image (*.png);;PDF document (*.pdf)");
  if (path.isEmpty()) return;
  QString error;
  if (!export_plot(plot, path, &error)) showError(error);
}

void MainWindow::exportAllDialog(bool csv) {
  const QString dir =
      QFileDialog::getExistingDirectory(this, csv ? "Export table and series as CSV to" : "Export all plots to");
  if (dir.isEmpty()) return;
  if (!mayReplace(csv ? csvExportPaths(dir) : plotExportPaths(dir))) return;
  if (csv)
    exportCsv(dir, true);
  else
    exportPlots(dir, true);
}

bool MainWindow::mayReplace(const QStringList& paths) {
  QStringList existing;
  for (const QString& p : paths)
    if (QFileInfo::exists(p)) existing << QFileInfo(p).fileName();
  if (existing.isEmpty()) return true;
  return QMessageBox::question(this, "Replace files?",
                               QString("%1 of the %2 files to write exist already (%3). Replace them?")
                                   .arg(existing.size())
                                   .arg(paths.size())
                                   .arg(existing.first()),
                               QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
}

ExportContext MainWindow::exportContext() const {
  ExportContext context;
  context.snapshot = path_;
  context.density = density();
  if (view_) {
    context.scope = view_->scope;
    context.step = view_->step;
  } else {
    context.scope = scope_;
    if (reader_) {
      std::lock_guard lock(hdf5_mutex());
      if (row_ < reader_->steps().size()) context.step = reader_->steps()[row_].step;
    }
  }
  return context;
}

QStringList MainWindow::plotExportPaths(const QString& dir) const {
  const QString stem = export_stem(exportContext());
  QStringList paths;
  for (const QString& name : plot_export_names())
    for (const char* suffix : {".png", ".pdf"}) paths << QDir(dir).filePath(stem + "-" + name + suffix);
  return paths;
}

QStringList MainWindow::csvExportPaths(const QString& dir) const {
  const QString stem = export_stem(exportContext());
  QStringList paths;
  for (const QString& name : csv_export_names()) paths << QDir(dir).filePath(stem + "-" + name + ".csv");
  return paths;
}

namespace {
// The first of paths that exists, or empty.
QString first_existing(const QStringList& paths) {
  for (const QString& p : paths)
    if (QFileInfo::exists(p)) return p;
  return {};
}

// Why an export must not start (empty: it may): nothing open, or a file it would replace unasked.
QString export_refusal(bool open, const QStringList& paths, bool replace) {
  if (!open) return "Nothing to export: open a snapshot first";
  if (const QString there = first_existing(paths); !replace && !there.isEmpty())
    return there + " exists; nothing exported (export again and agree to replace it)";
  return {};
}
}  // namespace

bool MainWindow::exportPlots(const QString& dir, bool replace) {
  const QStringList paths = reader_ ? plotExportPaths(dir) : QStringList();
  if (const QString why = export_refusal(reader_ != nullptr, paths, replace); !why.isEmpty()) {
    showError(why);
    return false;
  }
  updateCaptions();
  const auto all = plots();
  for (int i = 0; i < paths.size(); ++i) {
    QString error;
    if (!export_plot(all[std::size_t(i / 2)], paths[i], &error)) {
      showError(error);
      return false;
    }
  }
  status_label_->setText(QString("Exported %1 plots (PNG and PDF) to %2").arg(all.size()).arg(dir));
  return true;
}

bool MainWindow::exportCsv(const QString& dir, bool replace) {
  const QStringList paths = reader_ ? csvExportPaths(dir) : QStringList();
  if (const QString why = export_refusal(reader_ != nullptr, paths, replace); !why.isEmpty()) {
    showError(why);
    return false;
  }
  const auto files = csv_exports(view_.get(), series_.get(), density());
  for (std::size_t i = 0; i < files.size(); ++i) {
    QString error;
    if (!write_text_file(paths[int(i)], files[i].second, &error)) {
      showError(error);
      return false;
    }
  }
  status_label_->setText(QString("Exported %1 CSV files to %2").arg(files.size()).arg(dir));
  return true;
}

void MainWindow::updateCaptions() {
  const ExportContext context = exportContext();
  const QString caption = reader_ ? export_caption(context) : QString();
  const QString stem = reader_ ? export_stem(context) + "-" : QString();
  const auto all = plots();
  for (std::size_t i = 0; i < all.size(); ++i) {
    set_plot_caption(all[i], caption);
    all[i]->setProperty("gs_export_name", stem + plot_export_names()[int(i)]);
  }
}

}  // namespace gs::gui
