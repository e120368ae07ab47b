#pragma once
// The plots of `gradscope analyze --report`: the GUI's charts (charts.hpp) filled from an analysis
// file, drawn off-screen and saved as PNG files beside report.md. Stable file names:
//   ks-<kind>.png        KS D per SID over training, one per layer kind ("whole model" included)
//   quality-<density>.png  estimation quality per method over training, one per density
//   threshold-error.png  |threshold error| vs exact top-k per method and density
//   histogram.png        |g| with fitted densities and thresholds (needs the snapshot file)
//   qq.png               QQ plot of the best SID by AIC
// The last two and the quality plots show the focus vector: the whole model when it was analysed,
// else the largest layer, at the last analysed step.
#include <filesystem>
#include <vector>

#include "gs/analyzer/plots/charts.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/analyzer/summary.hpp"

namespace gs::analyzer::plots {

// Makes sure a QApplication exists for drawing widgets: the running one, or one created on the
// first call (always on the offscreen platform, whatever QT_QPA_PLATFORM says) and kept until the process
// exits. Call from the main thread. gs::Error when the process runs a QCoreApplication without
// widgets.
void ensure_application();

// |rel err| of every method but top-k (0 by construction) at every density, over the vectors whose
// target count n*density is at least kMinTargetCountForQuality, as the summary's quality table.
std::vector<ErrorBar> threshold_error_bars(const std::vector<VectorRow>& vectors,
                                           const std::vector<ThresholdRow>& thresholds, const StoredOptions& options);

// The PlotHook of export_outputs: draws every plot above into dir (created by the caller).
// Refuses (gs::Error, before drawing any) to replace an existing PNG unless replace. A plot that
// cannot be drawn (no snapshot for the histogram, no successful fit for the QQ plot) becomes a
// note instead.
ReportPlots render_report_plots(const AnalysisReader& reader, const std::filesystem::path& dir, bool replace);

}  // namespace gs::analyzer::plots
