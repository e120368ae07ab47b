#include "plot_interaction.hpp"

#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QToolTip>
#include <qcustomplot.h>

#include "gs/analyzer/plots/charts.hpp"

namespace gs::gui {

using analyzer::plots::format_number;

void make_interactive(QCustomPlot* plot) {
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

  // Value under the cursor: the nearest point of the graph under it, else the coordinates.
  QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot](QMouseEvent* event) {
    const QPointF pos = event->position();
    if (!plot->axisRect()->rect().contains(pos.toPoint())) return;
    const double x = plot->xAxis->pixelToCoord(pos.x()), y = plot->yAxis->pixelToCoord(pos.y());
    QString text = QString("x = %1, y = %2").arg(format_number(x), format_number(y));
    int index = -1;
    if (auto* graph = qobject_cast<QCPGraph*>(plot->plottableAt(pos, false, &index));
        graph && index >= 0 && index < graph->dataCount()) {
      const auto point = graph->data()->at(index);
      text = QString("%1\nx = %2, y = %3").arg(graph->name(), format_number(point->key), format_number(point->value));
    }
    QToolTip::showText(event->globalPosition().toPoint(), text, plot);
  });

  plot->setContextMenuPolicy(Qt::CustomContextMenu);
  QObject::connect(plot, &QWidget::customContextMenuRequested, plot, [plot](const QPoint& at) {
    QMenu menu(plot);
    // The window names what the plot shows (snapshot, layer, step, ratio, plot); the dialog asks
    // before it replaces a file.
    QString base = plot->property("gs_export_name").toString();
    if (base.isEmpty()) base = "plot";
    auto save = [plot, base](const QString& filter, const QString& suffix) {
      const QString path = QFileDialog::getSaveFileName(plot, "Export plot", base + suffix, filter);
      if (path.isEmpty()) return;
      QString error;
      if (!analyzer::plots::export_plot(plot, path, &error)) QMessageBox::warning(plot, "Export failed", error);
    };
    menu.addAction("Export as PNG...", [save] { save("PNG image (*.png)", ".png"); });
    menu.addAction("Export as PDF...", [save] { save("PDF document (*.pdf)", ".pdf"); });
    menu.addSeparator();
    menu.addAction("Reset view", [plot] { analyzer::plots::reset_view(plot); });
    menu.exec(plot->mapToGlobal(at));
  });
}

}  // namespace gs::gui
