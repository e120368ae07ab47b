// gradscope analyze FILE.h5 --out ANALYSIS.h5: fits, goodness of fit and thresholds vs exact
// top-k over every recorded step (gs::analyzer), then the summary, CSV and Markdown report.
#include <cstdio>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "device_failure.hpp"
#include "gs/analyzer/analyze.hpp"
#include "progress.hpp"
#include "table_flags.hpp"
#ifdef GS_HAVE_PLOTS
#include "gs/analyzer/plots/report_plots.hpp"
#endif

namespace gs::cli {
namespace {

struct AnalyzeArgs {
  analyzer::AnalyzeConfig config;
  std::string input, output;
  std::unique_ptr<TableTexts<analyzer::AnalyzeConfig>> options;  // analyzer::analyze_options()
};

int run_analyze(AnalyzeArgs& a) {
  auto& c = a.config;
  c.input = a.input;
  c.output = a.output;
  a.options->apply(c);
  c.validate();

  std::unique_ptr<Progress> bar;
  const auto progress = [&](std::int64_t done, std::int64_t total, const std::string& note) {
    if (!bar) bar = std::make_unique<Progress>("analyze", total, c.quiet);
    bar->update(done, note);
  };
  analyzer::AnalyzeResult r;
  try {
    r = analyzer::analyze(c, progress);
  } catch (const DeviceFailure& e) {
    bar.reset();  // ends the bar's line before the error's
    throw device_stop(
        e, "the steps analysed before it stay in " + c.output.string() + " (the same command adds the rest)");
  }
  if (bar)
    bar->finish(std::to_string(r.steps_analyzed) + " steps, " + std::to_string(r.vectors_analyzed) +
                " vectors analysed");
  if (!r.device_error.empty())
    warn_ran_on_cpu(r.device_error_backend, r.device_error,
                    "step " + std::to_string(r.device_error_step) + " and the later ones were analysed");
  const analyzer::AnalysisReader reader(c.output);
  // Plots are drawn by the Qt build's renderer (analyzer/plots/); without it the report holds
  // the tables and says why there are no plots.
  analyzer::PlotHook plots;
#ifdef GS_HAVE_PLOTS
  plots = analyzer::plots::render_report_plots;
#else
  if (!c.report_dir.empty())
    std::cerr << "gradscope: note: the report has no plots: this build has no Qt 6 and "
                 "QCustomPlot to draw them (rebuild with -DGS_ENABLE_GUI=ON)\n";
#endif
  analyzer::export_outputs(c, reader, plots);
  const analyzer::AnalysisSummary summary = analyzer::summarize(reader);

  if (c.json) {
    std::cout << analyzer::analyze_json(r, reader, summary).dump(2) << '\n';
  } else if (!c.quiet) {
    if (r.steps_skipped > 0)
      std::cout << r.steps_skipped << " steps were already in " << c.output.string() << "; " << r.steps_analyzed
                << " new steps analysed\n";
    analyzer::print_summary(std::cout, summary);
  }
  return 0;
}

Runner setup(CLI::App& sub) {
  auto a = std::make_shared<AnalyzeArgs>();
  auto& c = a->config;
  sub.add_option("file", a->input, "Snapshot file (gradscope capture)")->required();
  sub.add_option("--out,-o", a->output, "Analysis file to create or extend (HDF5)")->required();
  a->options = std::make_unique<TableTexts<analyzer::AnalyzeConfig>>(sub, analyzer::analyze_options());
  sub.add_flag("--json", c.json, "Print a JSON summary on stdout instead of the text summary");
  sub.add_flag("--quiet,-q", c.quiet, "No progress and no text summary");
  return [a] { return run_analyze(*a); };
}

GS_COMMAND("analyze", "Fit distributions and compare thresholds over every step of a snapshot", 50, setup);

}  // namespace
}  // namespace gs::cli
