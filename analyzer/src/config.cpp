// AnalyzeConfig: parsing of the step selection and granularity, validation of every option.
#include "gs/analyzer/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "gs/base/join.hpp"
#include "gs/error.hpp"
#include "gs/fitting/thresholds.hpp"

namespace gs::analyzer {
namespace {

std::string joined(const std::vector<std::string>& v) {
  return join(v, ", ");
}

std::optional<std::uint64_t> parse_index(const std::string& part, const std::string& whole) {
  if (part.empty()) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (ec != std::errc() || end != part.data() + part.size())
    throw Error("bad step selection '" + whole + "': '" + part +
                "' is not a row index (use a:b:c with non-negative integers, e.g. 0:100:10)");
  return v;
}

}  // namespace

std::string to_string(VectorSet v) {
  switch (v) {
    case VectorSet::layers: return "layer";
    case VectorSet::model: return "model";
    case VectorSet::both: return "both";
  }
  return "both";
}

VectorSet parse_vector_set(const std::string& text) {
  if (text == "layer") return VectorSet::layers;
  if (text == "model") return VectorSet::model;
  if (text == "both") return VectorSet::both;
  throw Error("unknown granularity '" + text + "': use layer, model or both");
}

StepSelection StepSelection::parse(const std::string& text) {
  std::vector<std::string> parts{""};
  for (char c : text) {
    if (c == ':') parts.emplace_back();
    else parts.back() += c;
  }
  if (parts.size() > 3)
    throw Error("bad step selection '" + text + "': use a:b:c (first row, end row, stride)");
  StepSelection s;
  if (parts.size() == 1) {  // one row
    const auto a = parse_index(parts[0], text);
    if (!a) return s;
    s.first = *a;
    s.last = *a + 1;
    return s;
  }
  s.first = parse_index(parts[0], text).value_or(0);
  s.last = parse_index(parts[1], text);
  if (parts.size() == 3) s.stride = parse_index(parts[2], text).value_or(1);
  if (s.stride == 0) throw Error("bad step selection '" + text + "': the stride must be at least 1");
  if (s.last && *s.last <= s.first)
    throw Error("bad step selection '" + text + "': it selects no row (end must exceed first)");
  return s;
}

std::string StepSelection::to_string() const {
  return std::to_string(first) + ":" + (last ? std::to_string(*last) : "") + ":" +
         std::to_string(stride);
}

std::vector<std::size_t> StepSelection::rows(std::size_t recorded) const {
  std::vector<std::size_t> out;
  const std::uint64_t end = std::min<std::uint64_t>(last.value_or(recorded), recorded);
  for (std::uint64_t r = first; r < end; r += stride) out.push_back(static_cast<std::size_t>(r));
  return out;
}

void AnalyzeConfig::validate() const {
  if (input.empty()) throw Error("no snapshot file given");
  if (output.empty()) throw Error("no output file given: pass --out ANALYSIS.h5");
  if (densities.empty()) throw Error("no ratio given: pass --ratios, e.g. 0.1,0.01,0.001");
  for (double r : densities) fitting::threshold_target(1, r);  // throws for a density outside (0, 1)
  for (std::size_t i = 0; i < densities.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (densities[i] == densities[j]) throw Error("ratio " + std::to_string(densities[i]) + " is repeated");
  auto check = [](const std::vector<std::string>& given, const std::vector<std::string>& all,
                  const char* what) {
    for (std::size_t i = 0; i < given.size(); ++i) {
      if (std::find(all.begin(), all.end(), given[i]) == all.end())
        throw Error(std::string("unknown ") + what + " '" + given[i] + "': use " + joined(all));
      if (std::find(given.begin(), given.begin() + static_cast<std::ptrdiff_t>(i), given[i]) !=
          given.begin() + static_cast<std::ptrdiff_t>(i))
        throw Error(std::string(what) + " '" + given[i] + "' is repeated");
    }
  };
  check(dists, fitting::all_dists(), "distribution");
  check(methods, fitting::all_methods(), "method");
  if (dists.empty() && methods.empty()) throw Error("nothing to do: no distribution and no method");
  if (stages < 0) throw Error("SIDCo stages must be at least 1 (or 0: by density)");
  if (ks_max_points == 0) throw Error("the KS sample size must be at least 1");
  if (qq_points < 1) throw Error("QQ points must be at least 1");
  if (jobs < 0) throw Error("--jobs must be 0 (one per core) or more, not " + std::to_string(jobs));
  if (memory_mib < 1) throw Error("--memory must be at least 1 MiB");
  if (backend != "auto" && backend != "cpu" && backend != "cuda" && backend != "cuda-host")
    throw Error("unknown backend '" + backend + "': use auto, cpu or cuda (or cuda-host, for checks)");
  check({on_device_error}, kOnDeviceErrorChoices, "--on-device-error value");
}

const std::vector<OptionRow<AnalyzeConfig>>& analyze_options() {
  using C = AnalyzeConfig;
#define GS_FIELD(expr) [](auto& c) -> auto& { return expr; }
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
    t.push_back(option_row<std::vector<double>, C>("--ratios", "Target densities, comma-separated",
                                                   GS_FIELD(c.densities)));
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
        "Rows of the snapshot's steps, a:b:c like a Python slice (default all); shards of one run "
        "merge with gradscope merge",
        [](const C& c) {  // all rows: empty, as the flag's default
          const std::string text = c.steps.to_string();
          return text == StepSelection{}.to_string() ? std::string() : text;
        },
        [](C& c, std::string_view text) { c.steps = StepSelection::parse(std::string(text)); }));
    t.push_back(option_row<std::string, C>("--backend", "auto, cpu or cuda", GS_FIELD(c.backend)));
    t.push_back(option_row<std::string, C>("--on-device-error", kOnDeviceErrorHelp, GS_FIELD(c.on_device_error),
                                           {}, kOnDeviceErrorChoices));
    t.push_back(option_row<int, C>("--stages", "SIDCo stages (0: by density, 1 at 0.1, 2 at 0.01, 3 at 0.001)", GS_FIELD(c.stages)));
    t.push_back(option_row<std::uint64_t, C>("--ks-max-points",
                                             "Largest sample for KS/AD (a uniform subsample beyond it)",
                                             GS_FIELD(c.ks_max_points)));
    t.push_back(option_row<std::uint64_t, C>("--seed", "Seed of the KS subsample and DGC's sample",
                                             GS_FIELD(c.seed)));
    t.push_back(option_row<int, C>("--jobs", "Layers analysed in parallel (0: one per core)", GS_FIELD(c.jobs)));
    t.back().alias = "-j";
    t.push_back(option_row<std::uint64_t, C>(
        "--memory", "MiB of layers held per step; a larger model is streamed layer by layer",
        GS_FIELD(c.memory_mib)));
    t.push_back(option_row<std::filesystem::path, C>(
        "--csv", "Also write fits.csv, thresholds.csv, tails.csv, vectors.csv here", GS_FIELD(c.csv_dir)));
    t.push_back(option_row<std::filesystem::path, C>(
        "--report", "Also write a Markdown report (report.md) with PNG plots (Qt build) here",
        GS_FIELD(c.report_dir)));
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
