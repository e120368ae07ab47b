#pragma once
// Kernel benchmarks shared by `gradscope bench kernels` and the standalone gs_kernels_bench (which
// the GPU machine builds without the apps). Not part of the installed libraries. Every figure comes with the time of
// one plain read pass (a sum over the same vector) measured in the same run, so ratios travel between machines.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gs/kernels/backend.hpp"

namespace gs::bench {

using kernels::BackendKind;

struct KernelBenchConfig {
  std::vector<std::uint64_t> sizes{1'000'000, 10'000'000, 100'000'000};
  std::vector<double> densities{0.1, 0.01, 0.001};
  BackendKind backend = BackendKind::cpu;
  int repeats = 0;                      // 0: chosen per size (more for small vectors), at least 3
  int sidco_stages = 2;                 // SIDCo-E stages (algorithms.md section 2)
  std::vector<int> sidco_stage_counts;  // several stage counts to time; empty: {sidco_stages}
  std::uint64_t seed = 20240611;
  bool baselines = true;  // CPU: also time top-k by nth_element on a copy (the common way)
  // A vector of the user's (e.g. real gradients) to run on instead of Laplace data of `sizes`.
  std::vector<float> input;
  std::string input_name;  // what `input` is, for the JSON
};

struct KernelBenchRow {
  // read | stats | stats_light | stats_above_light | count_above | compact | sidco-e |
  // sidco-e+compact | sidco-e+compact:full | sidco-e+compact:candidates | sidco-topk | topk |
  // topk-nth_element | sidco-e:resident | topk:resident | sidco-topk:resident (device backends:
  // Selector::select, the selection left on the device)
  std::string method;
  std::uint64_t n = 0;
  double density = 0.0;  // 0 where the method has none
  int passes = 0;        // reads of the whole vector the method makes
  double median_ms = 0.0;
  double min_ms = 0.0;
  double read_ms = 0.0;  // median of the read pass at this n, same run
  std::uint64_t selected = 0;
  int stages = 0;  // SIDCo rows: the stage count asked for (M)
  // Device backends: what one call queued (kernels::DeviceWork of the last timed call): its
  // launches, the elements its passes went over per element of the vector, and the cost model's
  // time for them (gs::kernels::modelled_ms).
  std::uint64_t launches = 0;
  double vector_passes = 0.0;
  double model_ms = 0.0;
  double ratio() const { return read_ms > 0 ? median_ms / read_ms : 0.0; }
};

// Validates the config (sizes >= 1, densities in (0, 1), repeats >= 0); throws gs::Error.
void validate(const KernelBenchConfig& config);

// Runs every method at every size (and density where it applies) on Laplace-distributed data
// (the magnitudes are exponential, as SIDCo-E assumes) drawn with the seed, or on config.input
// when it is given. `progress` (optional) gets a line per finished row.
std::vector<KernelBenchRow> run_kernels_bench(const KernelBenchConfig& config,
                                              const std::function<void(const KernelBenchRow&)>& progress = {});

// The rows as JSON ({"backend":..,"threads":..,"cpu":..,"rows":[..]}) and as an aligned table.
std::string kernels_bench_json(const KernelBenchConfig& config, const std::vector<KernelBenchRow>& rows);
std::string kernels_bench_table(const std::vector<KernelBenchRow>& rows);

}  // namespace gs::bench
