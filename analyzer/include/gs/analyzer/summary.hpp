#pragma once
// The summary of an analysis file: which SID fits best per layer kind over training (AIC wins,
// KS wins, median KS D), estimation quality per method and density (median, p5, p95, median
// |relative error| of the threshold), and overhead per method (median time). Computed from the
// tables alone, so it works on any analysis file; printed as text, Markdown or JSON.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gs/analyzer/store.hpp"

namespace gs::analyzer {

struct DistStanding {
  std::string dist;
  std::uint64_t aic_wins = 0;  // (step, scope) vectors where this SID had the lowest AIC
  std::uint64_t ks_wins = 0;   // ... the lowest KS D
  double median_ks_D = 0.0;    // NaN when every fit failed
  std::uint64_t fits = 0;      // successful fits
};

struct KindStanding {
  std::string kind;           // layer kind (see vectors.hpp) or "whole model"
  std::uint64_t vectors = 0;  // (step, scope) pairs
  std::vector<DistStanding> dists;
  std::string best_by_aic, best_by_ks;  // most wins ("" if none)
};

// Quality is summarised over the rows that are not too_small_for_quality (store.hpp).
struct MethodQuality {
  std::string method;
  double density = 0.0;
  std::uint64_t count = 0;                   // rows without error whose target count is large enough
  std::uint64_t too_small = 0;               // rows left out: n*density < kMinTargetCountForQuality
  double median = 0.0, p5 = 0.0, p95 = 0.0;  // of quality = achieved/target density
  double median_abs_rel_error = 0.0;         // of |threshold - exact| / exact
  double median_seconds = 0.0;
};

struct MethodOverhead {
  std::string method;
  double median_seconds = 0.0;        // over every row of the method
  double median_model_seconds = 0.0;  // over whole-model rows (NaN without them)
};

struct AnalysisSummary {
  std::string source;
  std::uint64_t steps = 0, vectors = 0;
  std::int64_t first_step = 0, last_step = 0;
  std::vector<KindStanding> kinds;
  std::vector<MethodQuality> quality;
  std::vector<MethodOverhead> overhead;
};

AnalysisSummary summarize(const AnalysisReader& reader);

void print_summary(std::ostream& out, const AnalysisSummary& s);
nlohmann::json summary_json(const AnalysisSummary& s);

// Plots in the Markdown report. A PlotHook, given the analysis, the report folder and whether it
// may replace files there, writes images into the folder and returns each one's title (the alt
// text), file name relative to the folder and one-line caption, plus notes on plots it skipped.
// analyzer/plots/ provides one (QCustomPlot renders PNGs off-screen) in builds with Qt; without a
// hook the report says kNoPlotsNote.
struct PlotImage {
  std::string title;
  std::string file;
  std::string caption;
};
struct ReportPlots {
  std::vector<PlotImage> images;
  std::vector<std::string> notes;
};
using PlotHook = std::function<ReportPlots(const AnalysisReader&, const std::filesystem::path& dir, bool replace)>;
inline constexpr const char* kNoPlotsNote =
    "No plots: this gradscope was built without Qt 6 and QCustomPlot, which render them "
    "(rebuild with -DGS_ENABLE_GUI=ON); the tables above hold the same numbers.";

std::string markdown_report(const AnalysisReader& reader, const AnalysisSummary& s, const ReportPlots& plots = {});

// CSV files of the tables into dir (created when missing): fits.csv, thresholds.csv, tails.csv,
// vectors.csv. Refuses (gs::Error) to replace any existing one unless force. Returns the paths.
std::vector<std::filesystem::path> export_csv(const AnalysisReader& reader, const std::filesystem::path& dir,
                                              bool force);

}  // namespace gs::analyzer
