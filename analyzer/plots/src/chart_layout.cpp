// The layout of a plot on screen, kept apart from the charts that fill it (charts.cpp stays under
// the house limit on length): before every replot the legend above the axes takes as many columns
// as fit, and the title and a message (show_plot_message) break into lines that fit the width.
#include "chart_layout.hpp"

#include <algorithm>

#include <QFontMetrics>
#include <qcustomplot.h>

#include "gs/analyzer/plots/charts.hpp"

namespace gs::analyzer::plots {

namespace {

// text broken at spaces into lines no wider than width (a longer word keeps a line of its own).
QString wrap_words(const QString& text, const QFont& font, int width) {
  const QFontMetrics metrics(font);
  QStringList lines;
  for (const QString& line : text.split('\n')) {
    QString current;
    for (const QString& word : line.split(' ')) {
      const QString longer = current.isEmpty() ? word : current + ' ' + word;
      if (!current.isEmpty() && metrics.horizontalAdvance(longer) > width) {
        lines << current;
        current = word;
      } else {
        current = longer;
      }
    }
    lines << current;
  }
  return lines.join('\n');
}

// As many legend columns above the axes as the plot's width holds, in balanced rows.
void fit_top_legend(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  const int count = legend->itemCount();
  if (count == 0) return;
  int widest = 1;
  for (int i = 0; i < count; ++i)
    if (QCPAbstractLegendItem* item = legend->item(i)) widest = std::max(widest, item->minimumOuterSizeHint().width());
  const int spacing = legend->columnSpacing();
  const int room = plot->viewport().width() - legend->margins().left() - legend->margins().right() - 8;
  int columns = std::clamp((room + spacing) / (widest + spacing), 1, count);
  const int rows = (count + columns - 1) / columns;
  columns = (count + rows - 1) / rows;
  if (legend->wrap() != columns || legend->fillOrder() != QCPLayoutGrid::foColumnsFirst) {
    legend->setWrap(columns);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
  }
}

}  // namespace

// Before every replot of a plot on screen: the legend above the axes takes as many columns as fit,
// and the title and a message break into lines that fit, so a narrow window clips none of them.
// Off screen (the report) the sizes are the caller's and nothing changes.
void fit_to_width(QCustomPlot* plot) {
  if (!plot->isVisible()) return;
  const int width = plot->viewport().width() - 16;
  if (width < 40) return;
  if (plot->property("gs_legend_top").toBool()) fit_top_legend(plot);
  if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) {
    // A text set since the last wrap (a new caption) is the one to wrap.
    if (title->text() != title->property("gs_wrapped").toString()) title->setProperty("gs_full", title->text());
    const QString wrapped = wrap_words(title->property("gs_full").toString(), title->font(), width);
    title->setProperty("gs_wrapped", wrapped);
    if (title->text() != wrapped) title->setText(wrapped);
  }
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)); text && text->objectName() == kMessageItem)
      text->setText(wrap_words(text->property("gs_full").toString(), text->font(), width));
}

QString plot_message(const QCustomPlot* plot) {
  for (int i = 0; i < plot->itemCount(); ++i)
    if (const auto* text = qobject_cast<const QCPItemText*>(plot->item(i)); text && text->objectName() == kMessageItem)
      return text->property("gs_full").toString();
  return {};
}

}  // namespace gs::analyzer::plots
