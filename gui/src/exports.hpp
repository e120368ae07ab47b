#pragma once
// What the window exports and how the files are named: every file starts with the context of what
// it shows (snapshot stem, layer, step, ratio: cnn-fc1.weight-step12-r0.01-histogram.png), so files
// from several layers or steps can sit in one folder without one replacing another. The CSV files
// hold the numbers behind each plot and the threshold table at full precision.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <QString>
#include <QStringList>

#include "training_source.hpp"

class QCustomPlot;

namespace gs::gui {

struct ExportContext {
  QString snapshot;  // the snapshot's path
  std::string scope;
  std::int64_t step = 0;
  double density = 0.0;
};

// "cnn-fc1.weight-step12-r0.01" ("model" for the whole model; characters a file name should not
// hold become '_').
QString export_stem(const ExportContext& context);
// "fc1.weight, step 12, ratio 0.01" ("whole model" for the whole model): the plots' second title line.
QString export_caption(const ExportContext& context);

// The plots' names in exported file names, in the window's order (histogram, qq, ks, quality,
// stages), and the CSV files' names.
const QStringList& plot_export_names();
const QStringList& csv_export_names();

// A plot's title (its setup_plot title) with the caption as a second line; empty: the title alone.
void set_plot_caption(QCustomPlot* plot, const QString& caption);
QString plot_title_text(QCustomPlot* plot);

// The CSV files (name as in csv_export_names, text) of what the window shows: the threshold table
// and histogram, fitted curves and QQ points of `view`, and the KS, quality and stages series at
// `density` of `series`. A null view or series gives header-only files.
std::vector<std::pair<QString, QString>> csv_exports(const VectorView* view, const TrainingSeries* series,
                                                     double density);

// Writes text to path; false with *error set when it cannot.
bool write_text_file(const QString& path, const QString& text, QString* error);

}  // namespace gs::gui
