#include "gs/analyzer/plots/charts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <QFileInfo>
#include <qcustomplot.h>

#include "gs/analyzer/plots/series.hpp"
#include "gs/analyzer/plots/vector_view.hpp"
#include "gs/fitting/threshold_methods.hpp"
#include "chart_layout.hpp"

namespace gs::analyzer::plots {

QColor dist_color(const std::string& dist) {
  static const std::map<std::string, QColor> colors = {{"exponential", QColor(31, 119, 180)},
                                                       {"gamma", QColor(44, 160, 44)},
                                                       {"gpareto", QColor(148, 103, 189)},
                                                       {"normal", QColor(255, 127, 14)}};
  auto it = colors.find(dist);
  return it == colors.end() ? QColor(Qt::darkGray) : it->second;
}

namespace {

// The method's row of the threshold-method table, or null for a name this build does not know
// (an analysis file from another build).
const fitting::ThresholdMethodInfo* method_row(const std::string& method) {
  for (const auto& row : fitting::threshold_methods())
    if (row.name == method) return &row;
  return nullptr;
}

bool exact_method(const std::string& method) {
  const fitting::ThresholdMethodInfo* row = method_row(method);
  return row && row->kind == fitting::ThresholdKind::exact;
}

}  // namespace

QColor method_color(const std::string& method) {
  const fitting::ThresholdMethodInfo* row = method_row(method);
  return row ? QColor(QRgb(row->colour)) : QColor(Qt::darkGray);
}

namespace {

void set_log_axis(QCPAxis* axis, bool log) {
  if (log) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    axis->setNumberFormat("eb");
    axis->setNumberPrecision(0);
  } else {
    axis->setScaleType(QCPAxis::stLinear);
    axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    axis->setNumberFormat("gb");
    axis->setNumberPrecision(4);
  }
}

// Clears data and items, keeps title, legend and interactions; the axes show again after a
// message hid them.
void clear_plot(QCustomPlot* plot) {
  plot->clearPlottables();
  plot->clearItems();
  plot->legend->setVisible(false);
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setVisible(true);
    axis->grid()->setVisible(true);
  }
}

void remember_view(QCustomPlot* plot) {
  plot->setProperty("gs_home", QVariantList{plot->xAxis->range().lower, plot->xAxis->range().upper,
                                            plot->yAxis->range().lower, plot->yAxis->range().upper});
}

void mark_step(QCustomPlot* plot, std::optional<std::int64_t> step) {
  if (!step) return;
  auto* line = new QCPItemStraightLine(plot);
  line->point1->setCoords(double(*step), 1.0);
  line->point2->setCoords(double(*step), 2.0);
  line->setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
}

QCPGraph* add_graph(QCustomPlot* plot, const QString& name, const QVector<double>& x, const QVector<double>& y,
                    const QPen& pen) {
  QCPGraph* g = plot->addGraph();
  g->setName(name);
  g->setData(x, y, true);
  g->setPen(pen);
  return g;
}

// x range of the steps with a little margin (a single step gets a window of +-1).
QCPRange step_range(const TrainingSeries& s) {
  if (s.steps.empty()) return {0, 1};
  const double a = double(s.steps.front()), b = double(s.steps.back());
  const double pad = b > a ? 0.03 * (b - a) : 1.0;
  return {a - pad, b + pad};
}

// Steps are integers: ticks at whole multiples of 1.
void set_step_axis(QCPAxis* axis) {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  axis->setTicker(ticker);
  axis->setNumberFormat("g");
  axis->setNumberPrecision(8);
}

void place_legend(QCustomPlot* plot, Qt::Alignment where) {
  plot->legend->setVisible(true);
  if (plot->property("gs_legend_inside").toBool()) plot->axisRect()->insetLayout()->setInsetAlignment(0, where);
}

// Log-log axes need positive values: the range of those in v (empty: none).
std::pair<double, double> positive_range(const QVector<double>& v) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (double x : v)
    if (x > 0 && std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  return {lo, hi};
}

// Readable decimal ticks on a logarithmic quality axis.
// 0.8 and 1.2 only on a narrow range, where they do not crowd the 1.
void set_quality_ticks(QCPAxis* axis, double lo, double hi) {
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  const bool narrow = hi / lo < 5.0;
  for (double t : {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,   0.2,   0.5,   0.8,   1.0,
                   1.2,   2.0,   5.0,   10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0})
    if (narrow || (t != 0.8 && t != 1.2)) ticker->addTick(t, QString::number(t, 'g', 3));
  axis->setTicker(ticker);
}

}  // namespace

QString format_number(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::abs(v);
  if (a != 0.0 && (a < 1e-2 || a >= 1e5)) return QString::number(v, 'e', 2);
  return QString::number(v, 'g', 3);
}

void setup_plot(QCustomPlot* plot, const QString& title, LegendPlace legend_place) {
  plot->setAntialiasedElements(QCP::aeAll);
  QFont axis_font = plot->font();
  axis_font.setPointSize(9);
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setTickLabelFont(axis_font);
    axis->setLabelFont(axis_font);
  }
  plot->plotLayout()->insertRow(0);
  QFont title_font = plot->font();
  title_font.setPointSize(10);
  title_font.setBold(true);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, title_font));
  QFont legend_font = plot->font();
  legend_font.setPointSize(8);
  plot->legend->setFont(legend_font);
  plot->legend->setBrush(QColor(255, 255, 255, 215));
  plot->legend->setRowSpacing(-2);
  plot->legend->setVisible(false);
  plot->setProperty("gs_title", title);
  if (legend_place == LegendPlace::right) {
    // A column right of the axes; the empty element below keeps the legend compact at the top.
    plot->axisRect()->insetLayout()->take(plot->legend);
    auto* column = new QCPLayoutGrid;
    plot->plotLayout()->addElement(1, 1, column);
    column->addElement(0, 0, plot->legend);
    column->addElement(1, 0, new QCPLayoutElement(plot));
    column->setRowStretchFactor(0, 0.001);
    plot->plotLayout()->setColumnStretchFactor(1, 0.001);
  } else if (legend_place == LegendPlace::top) {
    plot->axisRect()->insetLayout()->take(plot->legend);
    plot->plotLayout()->insertRow(1);
    plot->plotLayout()->addElement(1, 0, plot->legend);
    plot->plotLayout()->setRowStretchFactor(1, 0.001);
    plot->legend->setWrap(3);
    plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
    plot->legend->setBorderPen(Qt::NoPen);
    plot->legend->setMargins(QMargins(4, 0, 4, 0));
  }
  plot->setProperty("gs_legend_inside", legend_place == LegendPlace::inside);
  plot->setProperty("gs_legend_top", legend_place == LegendPlace::top);
  if (legend_place == LegendPlace::top) {
    plot->legend->setIconSize(22, 12);
    plot->legend->setRowSpacing(1);  // rows of a wrapped legend would cut their descenders
  }
  QObject::connect(plot, &QCustomPlot::beforeReplot, plot, [plot] { fit_to_width(plot); });
}

bool export_plot(QCustomPlot* plot, const QString& path, QString* error) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  bool ok = false;
  if (suffix == "png")
    ok = plot->savePng(path, 0, 0, 2.0);
  else if (suffix == "pdf")
    ok = plot->savePdf(path);
  else {
    if (error) *error = "choose a file name ending in .png or .pdf (got '" + path + "')";
    return false;
  }
  if (!ok && error) *error = "could not write " + path;
  return ok;
}

void reset_view(QCustomPlot* plot) {
  const QVariantList home = plot->property("gs_home").toList();
  if (home.size() != 4) return;
  plot->xAxis->setRange(home[0].toDouble(), home[1].toDouble());
  plot->yAxis->setRange(home[2].toDouble(), home[3].toDouble());
  plot->replot();
}

QCPGraph* find_graph(QCustomPlot* plot, const QString& name) {
  for (int i = 0; i < plot->graphCount(); ++i)
    if (plot->graph(i)->name() == name) return plot->graph(i);
  return nullptr;
}

void show_plot_message(QCustomPlot* plot, const QString& message) {
  clear_plot(plot);
  // The message alone: axes left from the last data (or the default 0..5) would read as data.
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setVisible(false);
    axis->grid()->setVisible(false);
  }
  auto* text = new QCPItemText(plot);
  text->setObjectName(kMessageItem);
  text->setProperty("gs_full", message);
  text->position->setType(QCPItemPosition::ptAxisRectRatio);
  text->position->setCoords(0.5, 0.5);
  text->setText(message);
  text->setTextAlignment(Qt::AlignCenter);
  text->setColor(QColor(110, 110, 110));
  plot->replot();
}

void plot_histogram(QCustomPlot* plot, const VectorView& view, double density) {
  clear_plot(plot);
  set_log_axis(plot->xAxis, true);
  set_log_axis(plot->yAxis, true);
  plot->xAxis->setLabel("|g|");
  plot->yAxis->setLabel("density");
  // Every bin at its centre, an empty one as NaN: QCustomPlot breaks the line and the fill there,
  // so empty bins stay gaps instead of being bridged. One empty bin beyond each end gives the first
  // and last bins their full width (a step is drawn half-way between centres: at the bin edge).
  const auto& h = view.histogram;
  const std::size_t bins = h.counts.size();
  const double ratio = std::pow(h.hi / h.lo, 1.0 / double(bins));
  const double gap = std::numeric_limits<double>::quiet_NaN();
  QVector<double> cx{h.lo / std::sqrt(ratio)}, cy{gap};
  std::size_t filled = 0;
  for (std::size_t i = 0; i < bins; ++i) {
    cx.push_back(std::sqrt(h.edge(i) * h.edge(i + 1)));
    cy.push_back(h.counts[i] > 0 && filled < view.bin_density.size() ? view.bin_density[filled++] : gap);
  }
  cx.push_back(h.hi * std::sqrt(ratio));
  cy.push_back(gap);
  QCPGraph* hist = add_graph(plot, "histogram", cx, cy, QPen(QColor(90, 90, 90), 1.2));
  hist->setLineStyle(QCPGraph::lsStepCenter);
  hist->setBrush(QColor(160, 160, 160, 70));
  hist->setName("histogram");

  double ylo = *std::min_element(view.bin_density.begin(), view.bin_density.end());
  double yhi = *std::max_element(view.bin_density.begin(), view.bin_density.end());
  ylo /= 3.0;
  yhi *= 3.0;
  for (const auto& curve : view.curves) {
    if (!curve.error.empty() || curve.x.empty()) continue;
    add_graph(plot, QString::fromStdString(curve.dist), QVector<double>(curve.x.begin(), curve.x.end()),
              QVector<double>(curve.pdf.begin(), curve.pdf.end()), QPen(dist_color(curve.dist), 2.0));
  }
  // Threshold lines run far beyond the view so they stay visible while panning.
  for (const auto& entry : view.report.thresholds) {
    const auto& r = entry.result;
    if (std::abs(r.density - density) > 1e-9 * density || !entry.error.empty() || !(r.threshold > 0)) continue;
    QCPGraph* line =
        add_graph(plot, QString::fromStdString(r.method), {r.threshold, r.threshold}, {ylo * 1e-6, yhi * 1e6},
                  QPen(method_color(r.method), exact_method(r.method) ? 2.2 : 1.4,
                       exact_method(r.method) ? Qt::SolidLine : Qt::DashLine));
    // The tooltip shows the threshold and the count selected; the table lists them all.
    line->setProperty("gs_method", QString::fromStdString(r.method));
    line->setName(
        QString("%1 (%2 sel.)").arg(QString::fromStdString(r.method), QLocale().toString(qulonglong(r.selected))));
  }
  // Inside the axes: two columns, the histogram and the laws, then the methods. (setWrap does not
  // move what is there: set it first, then rearrange by the fill order.) Above them: as many
  // columns as fit (fit_top_legend).
  if (plot->property("gs_legend_inside").toBool()) {
    plot->legend->setWrap(int(view.curves.size()) + 2);
    plot->legend->setFillOrder(QCPLayoutGrid::foRowsFirst, true);
  }
  plot->xAxis->setRange(view.histogram.lo / 1.5, view.histogram.hi * 1.5);
  plot->yAxis->setRange(ylo, yhi);
  place_legend(plot, Qt::AlignRight | Qt::AlignTop);
  remember_view(plot);
  plot->replot();
}

void plot_qq(QCustomPlot* plot, const VectorView& view, const std::string& dist) {
  const fitting::DistFit* fit = find_fit(view.report, dist);
  if (!fit || !fit->error.empty() || fit->qq.empty()) {
    show_plot_message(plot, QString::fromStdString(fit ? dist + " fit failed: " + fit->error : "no " + dist + " fit"));
    return;
  }
  // Log-log: the points log-spaced in the upper tail (add_tail_qq) spread evenly, and the tail,
  // where the thresholds are, gets as much room as the body.
  QVector<double> fx, sy;
  for (const auto& q : fit->qq)
    if (q.fitted > 0 && q.sample > 0 && std::isfinite(q.fitted) && std::isfinite(q.sample)) {
      fx.push_back(q.fitted);
      sy.push_back(q.sample);
    }
  if (fx.empty()) {
    show_plot_message(plot, QString::fromStdString("no positive " + dist + " quantiles to compare"));
    return;
  }
  clear_plot(plot);
  set_log_axis(plot->xAxis, true);
  set_log_axis(plot->yAxis, true);
  plot->xAxis->setLabel(QString::fromStdString(dist) + " quantile");
  plot->yAxis->setLabel("sample quantile of |g|");
  const auto [flo, fhi] = positive_range(fx);
  const auto [slo, shi] = positive_range(sy);
  const double lo = std::min(flo, slo) / 1.5, hi = std::max(fhi, shi) * 1.5;
  add_graph(plot, "y = x", {lo / 1e3, hi * 1e3}, {lo / 1e3, hi * 1e3}, QPen(QColor(150, 150, 150), 1, Qt::DashLine));
  QCPGraph* points = add_graph(plot, QString::fromStdString(dist), fx, sy, QPen(dist_color(dist), 1.5));
  points->setLineStyle(QCPGraph::lsNone);
  points->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
  plot->xAxis->setRange(lo, hi);
  plot->yAxis->setRange(lo, hi);
  place_legend(plot, Qt::AlignLeft | Qt::AlignTop);
  remember_view(plot);
  plot->replot();
}

void plot_ks(QCustomPlot* plot, const TrainingSeries& series, std::optional<std::int64_t> current_step) {
  clear_plot(plot);
  if (series.ks.empty()) {
    show_plot_message(plot, "no fits over training");
    return;
  }
  set_log_axis(plot->xAxis, false);
  set_log_axis(plot->yAxis, false);
  set_step_axis(plot->xAxis);
  plot->xAxis->setLabel("step");
  plot->yAxis->setLabel("KS statistic D");
  std::map<std::string, std::pair<QVector<double>, QVector<double>>> by_dist;
  double hi = 0.0;
  for (const auto& p : series.ks) {
    if (!std::isfinite(p.ks_D)) continue;
    by_dist[p.dist].first.push_back(double(p.step));
    by_dist[p.dist].second.push_back(p.ks_D);
    hi = std::max(hi, p.ks_D);
  }
  for (const auto& [dist, xy] : by_dist) {
    QCPGraph* g = add_graph(plot, QString::fromStdString(dist), xy.first, xy.second, QPen(dist_color(dist), 1.6));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
  }
  mark_step(plot, current_step);
  plot->xAxis->setRange(step_range(series));
  plot->yAxis->setRange(0.0, hi > 0 ? hi * 1.15 : 1.0);
  place_legend(plot, Qt::AlignRight | Qt::AlignTop);
  remember_view(plot);
  plot->replot();
}

void plot_quality(QCustomPlot* plot, const TrainingSeries& series, double density,
                  std::optional<std::int64_t> current_step) {
  clear_plot(plot);
  std::map<std::string, std::pair<QVector<double>, QVector<double>>> by_method;
  double lo = 0.7, hi = 1.4;
  for (const auto& p : series.methods) {
    // Top-k's quality is 1 by construction: the 1.0 line stands for it.
    if (exact_method(p.method) || std::abs(p.density - density) > 1e-9 * density) continue;
    if (!(std::isfinite(p.quality) && p.quality > 0)) continue;
    by_method[p.method].first.push_back(double(p.step));
    by_method[p.method].second.push_back(p.quality);
    lo = std::min(lo, p.quality);
    hi = std::max(hi, p.quality);
  }
  if (by_method.empty()) {
    show_plot_message(plot, QString("no thresholds at ratio %1 over training").arg(format_number(density)));
    return;
  }
  set_log_axis(plot->xAxis, false);
  set_log_axis(plot->yAxis, true);
  set_quality_ticks(plot->yAxis, lo, hi);
  set_step_axis(plot->xAxis);
  plot->xAxis->setLabel("step");
  // Short enough for a low plot; the ratio is in the title's caption (and the legend's name).
  plot->yAxis->setLabel("achieved / target");
  const QCPRange xr = step_range(series);
  const QVector<double> band_x{xr.lower - 1e9, xr.upper + 1e9};
  QCPGraph* band_lo = add_graph(plot, "-20%", band_x, {0.8, 0.8}, QPen(Qt::NoPen));
  QCPGraph* band_hi = add_graph(plot, "±20%", band_x, {1.2, 1.2}, QPen(Qt::NoPen));
  band_hi->setBrush(QColor(44, 160, 44, 45));
  band_hi->setChannelFillGraph(band_lo);
  band_lo->removeFromLegend();
  add_graph(plot, "ideal", band_x, {1.0, 1.0}, QPen(Qt::black, 1.2));
  for (const auto& [method, xy] : by_method) {
    QCPGraph* g = add_graph(plot, QString::fromStdString(method), xy.first, xy.second, QPen(method_color(method), 1.6));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
  }
  mark_step(plot, current_step);
  plot->xAxis->setRange(xr);
  plot->yAxis->setRange(lo / 1.2, hi * 1.2);
  place_legend(plot, Qt::AlignRight | Qt::AlignTop);
  remember_view(plot);
  plot->replot();
}

void plot_stages(QCustomPlot* plot, const TrainingSeries& series, double density,
                 std::optional<std::int64_t> current_step) {
  clear_plot(plot);
  std::map<std::string, std::pair<QVector<double>, QVector<double>>> by_method;
  int most = 1;
  for (const auto& p : series.methods) {
    const fitting::ThresholdMethodInfo* row = method_row(p.method);
    const bool staged =
        row && (row->kind == fitting::ThresholdKind::sidco || row->kind == fitting::ThresholdKind::sidco_topk);
    if (!staged || std::abs(p.density - density) > 1e-9 * density) continue;
    by_method[p.method].first.push_back(double(p.step));
    by_method[p.method].second.push_back(double(p.stages));
    most = std::max(most, p.stages);
  }
  if (by_method.empty()) {
    show_plot_message(plot, "no SIDCo thresholds over training");
    return;
  }
  set_log_axis(plot->xAxis, false);
  set_log_axis(plot->yAxis, false);
  set_step_axis(plot->xAxis);
  plot->xAxis->setLabel("step");
  plot->yAxis->setLabel("SIDCo stages run");
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  plot->yAxis->setTicker(ticker);
  // Variants often run the same count: offset them slightly so every line stays visible.
  double offset = -0.06;
  for (const auto& [method, xy] : by_method) {
    QVector<double> y = xy.second;
    for (auto& v : y) v += offset;
    offset += 0.06;
    QCPGraph* g = add_graph(plot, QString::fromStdString(method), xy.first, y, QPen(method_color(method), 1.6));
    g->setLineStyle(QCPGraph::lsStepLeft);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, 4));
  }
  mark_step(plot, current_step);
  plot->xAxis->setRange(step_range(series));
  plot->yAxis->setRange(0.0, most + 1.0);
  place_legend(plot, Qt::AlignRight | Qt::AlignBottom);
  remember_view(plot);
  plot->replot();
}

namespace {
// An error of exactly 0 (an exact method, sidco-topk) has no place on a log axis: a bar there
// would stand at the axis floor as if the error were that large. It is written at the floor
// instead, upwards: "0 (exact)", or "median 0" when some vectors had an error.
void mark_zero_error(QCustomPlot* plot, double key, double floor, const ErrorBar& e) {
  auto* text = new QCPItemText(plot);
  text->setObjectName(kZeroErrorItem);
  text->position->setType(QCPItemPosition::ptPlotCoords);
  text->position->setCoords(key, floor);
  text->setRotation(-90.0);
  text->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  text->setPadding(QMargins(4, 0, 0, 0));
  text->setText(std::isfinite(e.p95) && e.p95 > 0 ? "median 0" : "0 (exact)");
  text->setColor(QColor(40, 40, 40));
  text->setProperty("gs_method", QString::fromStdString(e.method));
}
}  // namespace

void plot_threshold_error(QCustomPlot* plot, const std::vector<ErrorBar>& bars) {
  clear_plot(plot);
  std::vector<std::string> methods;
  std::vector<double> densities;
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (const auto& b : bars) {
    if (std::find(methods.begin(), methods.end(), b.method) == methods.end()) methods.push_back(b.method);
    if (std::find(densities.begin(), densities.end(), b.density) == densities.end()) densities.push_back(b.density);
    for (double v : {b.p5, b.median, b.p95})
      if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(hi > 0)) {
    show_plot_message(plot, "no threshold errors to show (exact matches, or no vectors)");
    return;
  }
  lo /= 2.0;
  hi *= 2.0;
  set_log_axis(plot->yAxis, true);
  plot->yAxis->setLabel("|threshold - top-k threshold| / top-k threshold");
  QSharedPointer<QCPAxisTickerText> names(new QCPAxisTickerText);
  for (std::size_t m = 0; m < methods.size(); ++m) names->addTick(double(m + 1), QString::fromStdString(methods[m]));
  plot->xAxis->setScaleType(QCPAxis::stLinear);
  plot->xAxis->setTicker(names);
  plot->xAxis->setLabel("method (bar: median over vectors, whisker: 5th to 95th percentile)");
  // Ratios side by side within a method's slot; zero errors are written at the floor (log axis).
  static const QColor palette[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44), QColor(214, 39, 40),
                                   QColor(148, 103, 189)};
  const double width = 0.8 / double(densities.size());
  for (std::size_t r = 0; r < densities.size(); ++r) {
    auto* b = new QCPBars(plot->xAxis, plot->yAxis);
    b->setName(QString("ratio %1").arg(densities[r], 0, 'g', 6));
    b->setWidth(width);
    b->setBaseValue(lo);
    const QColor c = palette[r % std::size(palette)];
    b->setPen(QPen(c.darker(130)));
    b->setBrush(QColor(c.red(), c.green(), c.blue(), 190));
    auto* whiskers = new QCPErrorBars(plot->xAxis, plot->yAxis);
    whiskers->removeFromLegend();
    whiskers->setPen(QPen(QColor(40, 40, 40), 1.2));
    QVector<double> keys, values, minus, plus;
    for (const auto& e : bars) {
      if (e.density != densities[r] || !std::isfinite(e.median)) continue;
      const auto m = std::find(methods.begin(), methods.end(), e.method) - methods.begin();
      const double key = double(m + 1) + (double(r) - 0.5 * double(densities.size() - 1)) * width;
      if (!(e.median > 0)) {
        mark_zero_error(plot, key, lo, e);
        continue;
      }
      const double value = std::max(e.median, lo);
      keys.push_back(key);
      values.push_back(value);
      minus.push_back(value - std::max(std::isfinite(e.p5) ? e.p5 : value, lo));
      plus.push_back(std::max((std::isfinite(e.p95) ? e.p95 : value) - value, 0.0));
    }
    b->setData(keys, values, true);
    whiskers->setDataPlottable(b);
    whiskers->setData(minus, plus);
  }
  plot->xAxis->setRange(0.4, double(methods.size()) + 0.6);
  plot->yAxis->setRange(lo, hi);
  place_legend(plot, Qt::AlignLeft | Qt::AlignTop);
  remember_view(plot);
  plot->replot();
}

}  // namespace gs::analyzer::plots
