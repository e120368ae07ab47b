#pragma once
// The threshold methods, one row each: name, summary, rule, colour, kind and availability. The
// fitting report, the threshold compressors (compress/ makes one per row), the analyzer's plots,
// the CLI's choices and errors, Python (through the compressor registry) and the tests read it.
// A new method is one row in threshold_methods.cpp plus its rule (docs/architecture.md).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/fitting/passes.hpp"
#include "gs/fitting/thresholds.hpp"

namespace gs::fitting {

// What a rule may read beyond the data and the density; each rule uses what concerns it.
struct ThresholdRuleOptions {
  int stages = 3;          // SIDCo's stages; sidco-topk's stages of the bound's fit
  std::uint64_t seed = 0;  // DGC's random sample
  SidcoRule sidco = {};    // SIDCo's stage rule and count correction (sidco_threshold)
};
using ThresholdRule = ThresholdResult (*)(MagnitudePasses& passes, double density, const ThresholdRuleOptions& options);

// How a compressor selects with the method and how the plots show it.
enum class ThresholdKind {
  exact,       // the k largest: the reference the others are judged against (solid line, no quality)
  sidco,       // SIDCo's stages of `variant`: the adaptive stage controller, the backends' SIDCo pipeline
  sidco_topk,  // the k largest above a bound fitted to a sample, on the backends' pipeline
  estimate,    // the rule's threshold over the passes; what lies above it is sent
};

struct ThresholdMethodInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help and the docs
  ThresholdRule rule;
  std::uint32_t colour;  // 0xRRGGBB in the plots
  ThresholdKind kind;
  SidcoVariant variant = SidcoVariant::exponential;  // kind sidco only
  // Whether this build offers it (null: always); an unavailable row is listed nowhere else.
  bool (*available)() = nullptr;
  // Its rule draws a random sample (ThresholdRuleOptions::seed): the seed changes what it selects.
  bool seeded = false;
  // What the result's stages counts for this method, for the docs; empty: nothing (top-k, DGC),
  // and threshold_by_name reports 0 (the tables' NA).
  std::string_view stages = {};
};

// Every row, in a stable order (the order of the lists, reports and plots).
std::span<const ThresholdMethodInfo> threshold_methods();
// The row of `name` among the available ones; gs::Error naming it and listing the known ones.
const ThresholdMethodInfo& threshold_method(std::string_view name);
// The available methods' names in the table's order.
std::vector<std::string> threshold_method_names();

}  // namespace gs::fitting
