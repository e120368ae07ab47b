#pragma once
// Internal: fitting an on-screen plot to its width (legend columns above the axes, title and message
// wrapped) and the message item show_plot_message adds, shared by charts.cpp and chart_layout.cpp.
class QCustomPlot;

namespace gs::analyzer::plots {

// The object name of the centred message's text item; its property "gs_full" holds the whole text.
inline constexpr const char* kMessageItem = "gs_message";

// Before every replot of a plot on screen (setup_plot connects it to beforeReplot).
void fit_to_width(QCustomPlot* plot);

}  // namespace gs::analyzer::plots
