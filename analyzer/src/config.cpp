// AnalyzeConfig: parsing of the granularity, validation of every option, the option table.
#include "gs/analyzer/config.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "gs/base/enum_names.hpp"
#include "gs/base/error.hpp"
#include "gs/base/join.hpp"
#include "gs/fitting/thresholds.hpp"

namespace gs::analyzer {
namespace {

std::string joined(const std::vector<std::string>& v) { return join(v, ", "); }

}  // namespace

constexpr EnumName<VectorSet> kVectorSets[] = {
    {VectorSet::layers, "layer"}, {VectorSet::model, "model"}, {VectorSet::both, "both"}};

std::string to_string(VectorSet v) { return std::string(enum_name(kVectorSets, v)); }

VectorSet parse_vector_set(const std::string& text) { return enum_value(kVectorSets, text, "granularity"); }

void AnalyzeConfig::validate() const {
  if (input.empty()) throw Error("no snapshot file given");
  if (output.empty()) throw Error("no output file given: pass --out ANALYSIS.h5");
  if (densities.empty()) throw Error("--ratios: no ratio given; pass one or more, e.g. 0.1,0.01,0.001");
  for (double r : densities) {
    fitting::check_density(r, "--ratios: density");  // (0, 1], as fit and select take it
  }
  for (std::size_t i = 0; i < densities.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (densities[i] == densities[j]) throw Error("--ratios: ratio " + std::to_string(densities[i]) + " is repeated");
  auto check = [](const std::vector<std::string>& given, const std::vector<std::string>& all, const std::string& flag,
                  const char* what) {
    for (std::size_t i = 0; i < given.size(); ++i) {
      if (std::find(all.begin(), all.end(), given[i]) == all.end())
        throw Error(flag + ": unknown " + what + " '" + given[i] + "': use " + joined(all));
      if (std::find(given.begin(), given.begin() + static_cast<std::ptrdiff_t>(i), given[i]) !=
          given.begin() + static_cast<std::ptrdiff_t>(i))
        throw Error(flag + ": " + what + " '" + given[i] + "' is repeated");
    }
  };
  check(dists, fitting::all_dists(), "--dists", "distribution");
  check(methods, fitting::all_methods(), "--methods", "method");
  if (dists.empty() && methods.empty()) throw Error("nothing to do: no distribution and no method");
  if (stages < 0) throw Error("SIDCo stages must be at least 1 (or 0: by density)");
  if (ks_max_points == 0) throw Error("the KS sample size must be at least 1");
  if (qq_points < 1) throw Error("QQ points must be at least 1");
  if (jobs < 0) throw Error("--jobs must be 0 (one per core) or more, not " + std::to_string(jobs));
  if (memory_mib < 1) throw Error("--memory must be at least 1 MiB");
  if (backend != "auto" && backend != "cpu" && backend != "cuda" && backend != "cuda-host")
    throw Error("unknown backend '" + backend + "': use auto, cpu or cuda (or cuda-host, for checks)");
  check({on_device_error}, kOnDeviceErrorChoices, "--on-device-error", "value");
}

const std::vector<OptionRow<AnalyzeConfig>>& analyze_options() {
  using C = AnalyzeConfig;
#define GS_FIELD(expr) \
  [](auto& c) -> auto& { return expr; }
  // The granularity and the step selection read as text, through their own parsers.
  auto text_row = [](std::string flag, std::string help, std::function<std::string(const C&)> get,
                     std::function<void(C&, std::string_view)> set) {
    OptionRow<C> o;
    o.flag = std::move(flag);
    o.help = std::move(help);
    o.get = std::move(get);
    o.set = std::move(set);
    o.check = [](const C&) {};
    return o;
  };
  static const std::vector<OptionRow<C>> table = [&] {
    std::vector<OptionRow<C>> t;
    t.push_back(
        option_row<std::vector<double>, C>("--ratios", "Target densities, comma-separated", GS_FIELD(c.densities)));
    t.push_back(option_row<std::vector<std::string>, C>(
        "--dists", "SIDs to fit: " + fitting::comma_list(fitting::all_dists()), GS_FIELD(c.dists)));
    t.push_back(option_row<std::vector<std::string>, C>(
        "--methods", "Threshold methods: " + fitting::comma_list(fitting::all_methods()), GS_FIELD(c.methods)));
    t.push_back(text_row(
        "--granularity", "layer, model (whole model flattened) or both",
        [](const C& c) { return to_string(c.vectors); },
        [](C& c, std::string_view text) { c.vectors = parse_vector_set(std::string(text)); }));
    t.push_back(text_row(
        "--steps",
        "Training steps to analyse, by step number: a:b:c like a Python range (no b: on to the end), a "
        "step alone, or a comma list of them (default all recorded); shards of one run merge with "
        "gradscope merge",
        [](const C& c) {  // all rows: empty, as the flag's default
          const std::string text = c.steps.to_string();
          return text == StepSelection{}.to_string() ? std::string() : text;
        },
        [](C& c, std::string_view text) { c.steps = StepSelection::parse(std::string(text)); }));
    t.push_back(option_row<std::string, C>("--backend", "auto, cpu or cuda", GS_FIELD(c.backend)));
    t.push_back(option_row<std::string, C>("--on-device-error", kOnDeviceErrorHelp, GS_FIELD(c.on_device_error), {},
                                           kOnDeviceErrorChoices));
    t.push_back(option_row<int, C>("--stages", "SIDCo stages (0: by density, 1 at 0.1, 2 at 0.01, 3 at 0.001)",
                                   GS_FIELD(c.stages)));
    t.push_back(option_row<std::uint64_t, C>(
        "--ks-max-points", "Largest sample for KS/AD (a uniform subsample beyond it)", GS_FIELD(c.ks_max_points)));
    t.push_back(option_row<std::uint64_t, C>("--seed", "Seed of the KS subsample and DGC's sample", GS_FIELD(c.seed)));
    t.push_back(option_row<int, C>("--jobs", "Layers analysed in parallel (0: one per core)", GS_FIELD(c.jobs)));
    t.back().alias = "-j";
    t.push_back(option_row<std::uint64_t, C>(
        "--memory", "MiB of layers held per step; a larger model is streamed layer by layer", GS_FIELD(c.memory_mib)));
    t.push_back(option_row<std::filesystem::path, C>(
        "--csv", "Also write fits.csv, thresholds.csv, tails.csv, vectors.csv here", GS_FIELD(c.csv_dir)));
    t.push_back(option_row<std::filesystem::path, C>(
        "--report", "Also write a Markdown report (report.md) with PNG plots (Qt build) here", GS_FIELD(c.report_dir)));
    t.push_back(option_row<bool, C>("--force", "Recompute from scratch, replacing the output, CSV and report files",
                                    GS_FIELD(c.force)));
    return t;
  }();
#undef GS_FIELD
  return table;
}

int AnalyzeConfig::threads() const {
  return jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

fitting::FitReportOptions AnalyzeConfig::fit_options() const {
  fitting::FitReportOptions o;
  o.densities = densities;
  o.dists = dists;
  o.methods = methods;
  o.stages = stages;
  o.ks_max_points = ks_max_points;
  o.seed = seed;
  o.qq_points = qq_points;
  return o;
}

}  // namespace gs::analyzer
