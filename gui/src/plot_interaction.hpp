#pragma once
// What makes a chart of analyzer/plots interactive on screen: zoom (wheel) and pan (drag), a
// tooltip with the value under the cursor, and a context menu to export the plot (PNG or PDF) or
// reset its view. It lives here, not in analyzer/plots, so the report's off-screen renderer links
// no widget code of ours (tests/analyzer: analyzer.plots_link_no_widget_code).
class QCustomPlot;

namespace gs::gui {

// Call once per plot, after gs::analyzer::plots::setup_plot.
void make_interactive(QCustomPlot* plot);

}  // namespace gs::gui
