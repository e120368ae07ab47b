#include "exports.hpp"

#include <cmath>

#include <QFile>
#include <QFileInfo>
#include <QTextStream>
#include <qcustomplot.h>

namespace gs::gui {
namespace {

QString number(double v) { return QString::number(v, 'g', 17); }

// A CSV field: quoted when it holds a separator, a quote or a line break.
QString field(const std::string& text) {
  QString s = QString::fromStdString(text);
  if (!s.contains(',') && !s.contains('"') && !s.contains('\n')) return s;
  return '"' + s.replace('"', "\"\"") + '"';
}

bool same_density(double a, double b) { return std::abs(a - b) <= 1e-9 * b; }

QString ratio_text(double density) { return QString::number(density, 'g', 6); }

}  // namespace

QString export_stem(const ExportContext& context) {
  QString scope = context.scope == kModelScope ? QString("model") : QString::fromStdString(context.scope);
  QString stem = QFileInfo(context.snapshot).completeBaseName();
  for (QString* part : {&stem, &scope})
    for (QChar& c : *part)
      if (!(c.isLetterOrNumber() || c == '.' || c == '_' || c == '-')) c = '_';
  return QString("%1-%2-step%3-r%4").arg(stem, scope).arg(context.step).arg(ratio_text(context.density));
}

QString export_caption(const ExportContext& context) {
  const QString scope = context.scope == kModelScope ? QString("whole model") : QString::fromStdString(context.scope);
  return QString("%1, step %2, ratio %3").arg(scope).arg(context.step).arg(ratio_text(context.density));
}

const QStringList& plot_export_names() {
  static const QStringList names{"histogram", "qq", "ks", "quality", "stages"};
  return names;
}

const QStringList& csv_export_names() {
  static const QStringList names{"thresholds", "histogram", "curves", "qq", "ks", "quality", "stages"};
  return names;
}

void set_plot_caption(QCustomPlot* plot, const QString& caption) {
  auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
  if (!title) return;
  const QString base = plot->property("gs_title").toString();
  const QString text = caption.isEmpty() ? base : base + "\n" + caption;
  if (title->text() == text) return;
  title->setText(text);
  plot->replot();
}

QString plot_title_text(QCustomPlot* plot) {
  auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
  return title ? title->text() : QString();
}

std::vector<std::pair<QString, QString>> csv_exports(const VectorView* view, const TrainingSeries* series,
                                                     double density) {
  QString thresholds = "method,density,n,threshold,selected,quality,stages,error\n";
  QString histogram = "bin_lo,bin_hi,count,density\n";
  QString curves = "dist,x,pdf\n";
  QString qq = "dist,probability,fitted,sample\n";
  if (view) {
    for (const auto& entry : view->report.thresholds) {
      const auto& t = entry.result;
      if (!same_density(t.density, density)) continue;
      thresholds +=
          QString("%1,%2,%3,%4,%5,%6,%7,%8\n")
              .arg(field(t.method), number(t.density), QString::number(view->n), number(t.threshold),
                   QString::number(t.selected), number(t.quality), QString::number(t.stages), field(entry.error));
    }
    const auto& h = view->histogram;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      const double a = h.edge(i), b = h.edge(i + 1);
      const double d = view->finite_nonzero ? double(h.counts[i]) / (double(view->finite_nonzero) * (b - a)) : 0.0;
      histogram += QString("%1,%2,%3,%4\n").arg(number(a), number(b), QString::number(h.counts[i]), number(d));
    }
    for (const auto& c : view->curves)
      for (std::size_t j = 0; j < c.x.size(); ++j)
        curves += QString("%1,%2,%3\n").arg(field(c.dist), number(c.x[j]), number(c.pdf[j]));
    for (const auto& f : view->report.fits)
      for (const auto& p : f.qq)
        qq += QString("%1,%2,%3,%4\n").arg(field(f.dist), number(p.probability), number(p.fitted), number(p.sample));
  }
  QString ks = "step,dist,ks_D\n";
  QString quality = "step,method,density,quality\n";
  QString stages = "step,method,density,stages\n";
  if (series) {
    for (const auto& p : series->ks) ks += QString("%1,%2,%3\n").arg(p.step).arg(field(p.dist), number(p.ks_D));
    for (const auto& p : series->methods) {
      if (!same_density(p.density, density)) continue;
      quality += QString("%1,%2,%3,%4\n").arg(p.step).arg(field(p.method), number(p.density), number(p.quality));
      stages += QString("%1,%2,%3,%4\n").arg(p.step).arg(field(p.method), number(p.density), QString::number(p.stages));
    }
  }
  const QString texts[] = {thresholds, histogram, curves, qq, ks, quality, stages};
  std::vector<std::pair<QString, QString>> out;
  for (int i = 0; i < csv_export_names().size(); ++i) out.emplace_back(csv_export_names()[i], texts[i]);
  return out;
}

bool write_text_file(const QString& path, const QString& text, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
    if (error) *error = "could not write " + path + ": " + file.errorString();
    return false;
  }
  const QByteArray bytes = text.toUtf8();
  if (file.write(bytes) != bytes.size() || !file.flush()) {
    if (error) *error = "could not write " + path + ": " + file.errorString();
    return false;
  }
  return true;
}

}  // namespace gs::gui
