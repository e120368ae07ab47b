#pragma once
// What `gradscope analyze` does, as one config struct of defaults: the CLI parses into it and the
// GUI fills the same struct. The options that shape the results (densities, dists, methods,
// granularity, steps, stages, KS sample size, seed) are stored in the analysis file; re-running
// with other values is refused unless forced.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gs/analyzer/step_selection.hpp"
#include "gs/base/option_table.hpp"
#include "gs/fitting/report.hpp"

namespace gs::analyzer {

// Which vectors of each step are analysed (the --granularity flag): every layer, the whole model
// flattened, or both. (How a compressor groups a model is compress::Granularity, another matter.)
enum class VectorSet { layers, model, both };
std::string to_string(VectorSet v);
VectorSet parse_vector_set(const std::string& text);  // "layer" | "model" | "both"

// What a command does when the device fails part-way (a gs::DeviceFailure: out of memory, a CUDA
// status): "stop" with that failure in one line, or "cpu": run the interrupted work again on the
// CPU backend and say so (`--on-device-error`, on `gradscope fit` and `gradscope analyze`).
inline const std::vector<std::string> kOnDeviceErrorChoices = {"stop", "cpu"};
inline constexpr const char* kOnDeviceErrorHelp =
    "when the device fails (out of memory, a CUDA error): stop, or run the work again on the CPU "
    "backend (cpu) and say so";

struct AnalyzeConfig {
  std::filesystem::path input;   // snapshot file (gs::data::SnapshotReader)
  std::filesystem::path output;  // analysis file (docs/analysis-format.md)
  std::vector<double> densities{0.1, 0.01, 0.001};
  std::vector<std::string> dists = fitting::all_dists();
  std::vector<std::string> methods = fitting::all_methods();
  VectorSet vectors = VectorSet::both;
  StepSelection steps;
  std::string backend = "auto";          // auto | cpu | cuda | cuda-host
  std::string on_device_error = "stop";  // kOnDeviceErrorChoices
  int stages = 0;                        // SIDCo's stages; 0: default_sidco_stages(density)
  std::uint64_t ks_max_points = fitting::kDefaultKsMaxPoints;
  std::uint64_t seed = 20240601;
  int qq_points = 19;
  // How the work runs; neither changes a result, so neither is stored with the results.
  int jobs = 0;                    // layers analysed in parallel on the CPU (0: one per core)
  std::uint64_t memory_mib = 128;  // layers held in memory per step; the whole model is streamed
                                   // layer by layer beyond it (gs/analyzer/streamed.hpp)
  bool force = false;              // recompute from scratch, replace the output, CSV and report files
  bool quiet = false;
  // Exports after the analysis (empty: none).
  std::filesystem::path csv_dir;     // fits.csv, thresholds.csv, tails.csv, vectors.csv
  std::filesystem::path report_dir;  // report.md
  bool json = false;                 // JSON summary on stdout (the CLI prints it)

  // gs::Error naming the first bad option and what to use instead.
  void validate() const;
  // jobs, or the cores when it is 0.
  int threads() const;
  // The report options used for every vector.
  fitting::FitReportOptions fit_options() const;
};

// The options of `gradscope analyze` as one table: its flags, their defaults and help, and the
// keywords of Python's gradscope.analyze (the key: ks_max_points for --ks-max-points). Every
// setting of AnalyzeConfig a user gives, besides the input, the output and the command line's own
// --json and --quiet. The rows parse (and check their choices); validate() checks the rest.
const std::vector<OptionRow<AnalyzeConfig>>& analyze_options();

}  // namespace gs::analyzer
