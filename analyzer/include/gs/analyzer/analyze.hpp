#pragma once
// The analysis pipeline behind `gradscope analyze`: for each selected step of a snapshot, each
// layer and/or the whole model flattened, every SID fit with its goodness of fit (fit_report) and
// every threshold method at every density, timed and compared with exact top-k's threshold. Streams
// step by step, holding at most config.memory_mib MiB of layers plus one layer per job: a larger
// model is streamed layer by layer (gs/analyzer/streamed.hpp).
#include <cstdint>
#include <functional>
#include <cstddef>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "gs/analyzer/config.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/analyzer/summary.hpp"
#include "gs/data/snapshot.hpp"

namespace gs::analyzer {

// Progress callback: vectors done of total, and a short note (the step being analysed). The CLI
// wires it to gs::cli::Progress; libraries know nothing of terminals.
using ProgressFn = std::function<void(std::int64_t done, std::int64_t total, const std::string& note)>;

struct AnalyzeResult {
  std::size_t steps_selected = 0;  // rows the step selection picks in the snapshot
  std::size_t steps_skipped = 0;   // already in the output file
  std::size_t steps_analyzed = 0;  // added by this run
  std::size_t vectors_analyzed = 0;
  bool created = false;  // a new output file (not an append)
  double seconds = 0.0;
  std::string backend;  // the backend that analysed the last step ("cpu" after a fallback)
  // With on_device_error "cpu": the device failure that sent the work to the CPU (empty: none),
  // the backend it happened on and the step it interrupted. That step and the later ones ran on
  // the CPU; the earlier ones on the backend asked for.
  std::string device_error;
  std::string device_error_backend;
  std::int64_t device_error_step = 0;
};

// One vector's results (no I/O): what analyze() stores for it. Exposed for tests and benchmarks.
// passes reads the vector; n is its element count.
void analyze_vector(fitting::MagnitudePasses& passes, const fitting::FitReportOptions& options,
                    const std::vector<std::string>& methods, std::int64_t step, const std::string& scope,
                    const std::string& kind, StepResults& into);

// How one step's vectors are scheduled on `jobs` threads (each vector's passes on one thread):
// the whole model (whole) and each layer (per_layer, layer_sizes their element counts). The
// model's vector holds the layers' values, so on one thread it takes about as long as all layers
// together; it joins the layers' pool as one task when that thread would finish no later than the
// pool's share of the step's work (model work x jobs <= the step's work: up to two threads when
// both are analysed), instead of the layers waiting for its less parallel parts (sampling,
// sorting, searches). Otherwise, or when it is not in memory (model_in_memory false: streamed
// layer by layer), it goes first, alone, with the backend's own parallelism. The pool runs its
// tasks largest first, so that the last to start is a small one.
struct StepPlan {
  static constexpr std::ptrdiff_t kModel = -1;
  bool model_alone = false;           // the model first, before the pool
  std::vector<std::ptrdiff_t> tasks;  // the pool's tasks in the order they start: kModel or a layer
};
StepPlan plan_step(std::span<const std::uint64_t> layer_sizes, bool whole, bool per_layer, int jobs,
                   bool model_in_memory);

// Runs the analysis into config.output (validating config first): creates it, or appends the
// selected steps it lacks; with force replaces it. Exports (CSV, report) are separate: see
// export_outputs(). gs::Error for bad options, unreadable input, or an output that exists with
// another source or options (suggesting --force). A failure of the device (gs::DeviceFailure)
// never becomes a row: it is thrown (the steps written before it stay), or with
// config.on_device_error "cpu" the step it interrupted and the rest run on the CPU backend, as
// the result says.
AnalyzeResult analyze(const AnalyzeConfig& config, const ProgressFn& progress = {});

// Writes what config asks for besides the store: CSV tables (csv_dir) and the Markdown report
// (report_dir) with the images plots draws there (none: the report says kNoPlotsNote). Refuses to
// replace existing files unless config.force.
void export_outputs(const AnalyzeConfig& config, const AnalysisReader& reader, const PlotHook& plots = {});

// `gradscope analyze --json` (and what Python's gradscope.analyze returns): source, output (the
// reader's file), created, steps_selected, steps_skipped, steps_analyzed, vectors_analyzed, backend,
// seconds, summary (summary_json), and after a device failure that sent the work to the CPU
// device_error, device_error_backend and device_error_step.
nlohmann::json analyze_json(const AnalyzeResult& result, const AnalysisReader& reader, const AnalysisSummary& summary);

// The demo's one call: analyse config.input into config.output (forced: the demo owns its
// files), then print the terminal summary to out. Returns the summary.
AnalysisSummary analyze_and_summarize(AnalyzeConfig config, std::ostream& out, const ProgressFn& progress = {});

}  // namespace gs::analyzer
