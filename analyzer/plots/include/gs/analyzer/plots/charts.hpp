#pragma once
// The charts of gradscope-gui and of the `gradscope analyze --report` plots, each a QCustomPlot
// filled from a VectorView, a TrainingSeries or error bars. Every plot has a title and a legend,
// and names its graphs so tests can find them: the histogram is "histogram", curves are named by
// SID ("gamma"), threshold lines by method ("sidco-e"), over-training series by SID or method,
// error bars by density ("0.01"). Nothing here reacts to the mouse or opens a window: the report
// draws these off-screen, and gradscope-gui adds zoom, pan, tooltips and a context menu itself
// (gui/src/plot_interaction.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <QColor>
#include <QString>

class QCustomPlot;
class QCPGraph;

namespace gs::analyzer::plots {

struct VectorView;
struct TrainingSeries;

// Where a plot's legend sits: inside the axes, in a column right of them, or in rows above them
// (on screen as many columns as the plot's width holds).
enum class LegendPlace { inside, right, top };
// Axes, fonts, title and legend. Call once per plot.
void setup_plot(QCustomPlot* plot, const QString& title, LegendPlace legend = LegendPlace::inside);
// Saves by suffix (.png or .pdf); false with *error set when the file cannot be written.
bool export_plot(QCustomPlot* plot, const QString& path, QString* error);
// Restores the ranges set when the plot was last filled.
void reset_view(QCustomPlot* plot);
// The graph called name, or nullptr.
QCPGraph* find_graph(QCustomPlot* plot, const QString& name);
// Shows a centred message in an emptied plot (no data, an error, work under way), without axes.
// On screen it breaks into lines that fit the plot, as the title does.
void show_plot_message(QCustomPlot* plot, const QString& message);
// The message shown_plot_message put there (whole, unbroken), or empty when the plot shows data.
QString plot_message(const QCustomPlot* plot);

// Density histogram on log-log axes (the "histogram" graph has a point at every bin's centre and
// one beyond each end, NaN where a bin is empty, so empty bins are drawn as gaps), the fitted
// density of every SID, and a vertical line at the
// threshold of every method at density (legend: threshold and elements selected).
void plot_histogram(QCustomPlot* plot, const VectorView& view, double density);
// Sample quantiles against the chosen SID's quantiles (with the identity line) on log-log axes,
// so the tail points (VectorView's QQ, add_tail_qq) are as visible as the body.
void plot_qq(QCustomPlot* plot, const VectorView& view, const std::string& dist);
// Over training; current_step, when given, is marked with a vertical line.
void plot_ks(QCustomPlot* plot, const TrainingSeries& series, std::optional<std::int64_t> current_step = std::nullopt);
void plot_quality(QCustomPlot* plot, const TrainingSeries& series, double density,
                  std::optional<std::int64_t> current_step = std::nullopt);
void plot_stages(QCustomPlot* plot, const TrainingSeries& series, double density,
                 std::optional<std::int64_t> current_step = std::nullopt);

// |relative error| of a method's threshold against exact top-k's at one density, over many vectors.
struct ErrorBar {
  std::string method;
  double density = 0.0;
  std::uint64_t count = 0;                   // vectors behind the numbers
  double median = 0.0, p5 = 0.0, p95 = 0.0;  // of |rel err|
};
// Bars at the median per method (one bar per density, side by side) with p5-p95 whiskers, on a log
// axis; methods keep the order of their first bar. A median of exactly 0 gets no bar (the log axis
// has no 0): a text item named kZeroErrorItem at the axis floor says "0 (exact)" instead.
void plot_threshold_error(QCustomPlot* plot, const std::vector<ErrorBar>& bars);
inline constexpr const char* kZeroErrorItem = "zero-error";

QString format_number(double v);                 // 3 significant digits, scientific when small or large
QColor method_color(const std::string& method);  // the colour of a method's line
QColor dist_color(const std::string& dist);      // the colour of a SID's curve

}  // namespace gs::analyzer::plots
