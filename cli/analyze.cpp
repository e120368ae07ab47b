// gradscope analyze FILE.h5 --out ANALYSIS.h5: fits, goodness of fit and thresholds vs exact
// top-k over every recorded step (gs::analyzer), then the summary, CSV and Markdown report.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "device_failure.hpp"
#include "gs/analyzer/analyze.hpp"
#include "progress.hpp"
#ifdef GS_HAVE_PLOTS
#include "gs/analyzer/plots/report_plots.hpp"
#endif

namespace gs::cli {
namespace {

struct AnalyzeArgs {
  analyzer::AnalyzeConfig config;
  std::string input, output, granularity = "both", steps, csv_dir, report_dir;
};

int run_analyze(AnalyzeArgs& a) {
  auto& c = a.config;
  c.input = a.input;
  c.output = a.output;
  c.vectors = analyzer::parse_vector_set(a.granularity);
  c.steps = analyzer::StepSelection::parse(a.steps);
  c.csv_dir = a.csv_dir;
  c.report_dir = a.report_dir;
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
    throw device_stop(e, "the steps analysed before it stay in " + c.output.string() +
                             " (the same command adds the rest)");
  }
  if (bar) bar->finish(std::to_string(r.steps_analyzed) + " steps, " + std::to_string(r.vectors_analyzed) +
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
    nlohmann::json j{{"source", reader.source().path},
                     {"output", c.output.string()},
                     {"created", r.created},
                     {"steps_selected", r.steps_selected},
                     {"steps_skipped", r.steps_skipped},
                     {"steps_analyzed", r.steps_analyzed},
                     {"vectors_analyzed", r.vectors_analyzed},
                     {"backend", r.backend},
                     {"seconds", r.seconds},
                     {"summary", analyzer::summary_json(summary)}};
    if (!r.device_error.empty()) {  // the steps from device_error_step on ran on the CPU
      j["device_error"] = r.device_error;
      j["device_error_backend"] = r.device_error_backend;
      j["device_error_step"] = r.device_error_step;
    }
    std::cout << j.dump(2) << '\n';
  } else if (!c.quiet) {
    if (r.steps_skipped > 0)
      std::cout << r.steps_skipped << " steps were already in " << c.output.string() << "; "
                << r.steps_analyzed << " new steps analysed\n";
    analyzer::print_summary(std::cout, summary);
  }
  return 0;
}

Runner setup(CLI::App& sub) {
  auto a = std::make_shared<AnalyzeArgs>();
  auto& c = a->config;
  sub.add_option("file", a->input, "Snapshot file (gradscope capture)")->required();
  sub.add_option("--out,-o", a->output, "Analysis file to create or extend (HDF5)")->required();
  sub.add_option("--ratios", c.densities, "Target densities, comma-separated")->delimiter(',')
      ->capture_default_str();
  sub.add_option("--dists", c.dists, "SIDs to fit: " + gs::comma_list(gs::kAllDists))->delimiter(',')
      ->capture_default_str();
  sub.add_option("--methods", c.methods,
                 "Threshold methods: " + gs::comma_list(gs::kAllMethods))
      ->delimiter(',')->capture_default_str();
  sub.add_option("--granularity", a->granularity, "layer, model (whole model flattened) or both")
      ->capture_default_str();
  sub.add_option("--steps", a->steps,
                 "Rows of the snapshot's steps, a:b:c like a Python slice (default all); shards of "
                 "one run merge with gradscope merge");
  sub.add_option("--backend", c.backend, "auto, cpu or cuda")->capture_default_str();
  add_on_device_error_option(sub, c.on_device_error);
  sub.add_option("--stages", c.stages, "SIDCo stages")->capture_default_str();
  sub.add_option("--ks-max-points", c.ks_max_points,
                 "Largest sample for KS/AD (a uniform subsample beyond it)")->capture_default_str();
  sub.add_option("--seed", c.seed, "Seed of the KS subsample and DGC's sample")->capture_default_str();
  sub.add_option("--jobs,-j", c.jobs, "Layers analysed in parallel (0: one per core)")->capture_default_str();
  sub.add_option("--memory", c.memory_mib,
                 "MiB of layers held per step; a larger model is streamed layer by layer")
      ->capture_default_str();
  sub.add_option("--csv", a->csv_dir, "Also write fits.csv, thresholds.csv, tails.csv, vectors.csv here");
  sub.add_option("--report", a->report_dir,
                 "Also write a Markdown report (report.md) with PNG plots (Qt build) here");
  sub.add_flag("--json", c.json, "Print a JSON summary on stdout instead of the text summary");
  sub.add_flag("--force", c.force, "Recompute from scratch, replacing the output, CSV and report files");
  sub.add_flag("--quiet,-q", c.quiet, "No progress and no text summary");
  return [a] { return run_analyze(*a); };
}

GS_COMMAND("analyze", "Fit distributions and compare thresholds over every step of a snapshot", 50, setup);

}  // namespace
}  // namespace gs::cli
