// The threshold-method table, and what reads it by name: threshold_by_name and method_name.
#include "gs/fitting/threshold_methods.hpp"

#include <algorithm>
#include <array>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"

namespace gs::fitting {
namespace {

using Options = ThresholdRuleOptions;
constexpr std::string_view kSidcoStages = "SIDCo stages run";

template <SidcoVariant V>
ThresholdResult sidco_rule(MagnitudePasses& passes, double density, const Options& o) {
  return sidco_threshold(passes, density, V, o.stages, o.sidco);
}

constexpr std::array<ThresholdMethodInfo, 8> kMethods = {{
    {"topk", "exact top-k by magnitude (ties to the lower index)",
     [](MagnitudePasses& p, double d, const Options&) { return topk_threshold(p, d); }, 0x000000, ThresholdKind::exact},
    {"sidco-e", "SIDCo: exponential fits at every stage (multi-stage, adaptive stage count)",
     sidco_rule<SidcoVariant::exponential>, 0x1f77b4, ThresholdKind::sidco, SidcoVariant::exponential, nullptr, false,
     kSidcoStages},
    {"sidco-p", "SIDCo: generalized-Pareto fits at every stage", sidco_rule<SidcoVariant::pareto>, 0x9467bd,
     ThresholdKind::sidco, SidcoVariant::pareto, nullptr, false, kSidcoStages},
    {"sidco-gp", "SIDCo: a gamma first stage, generalized-Pareto tail stages", sidco_rule<SidcoVariant::gamma_pareto>,
     0x2ca02c, ThresholdKind::sidco, SidcoVariant::gamma_pareto, nullptr, false, kSidcoStages},
    {"sidco-topk", "exact top-k at SIDCo's cost: the k largest above a bound fitted to a sample",
     [](MagnitudePasses& p, double d, const Options& o) { return sidco_topk_threshold(p, d, std::max(o.stages, 1)); },
     0x17becf, ThresholdKind::sidco_topk, SidcoVariant::exponential, nullptr, false,
     "bounds tried: 1, plus one per fallback read"},
    {"dgc", "DGC: the threshold of a 1% random sample, exact top-k when it overshoots",
     [](MagnitudePasses& p, double d, const Options& o) { return dgc_threshold(p, d, o.seed); }, 0xd62728,
     ThresholdKind::estimate, SidcoVariant::exponential, nullptr, /*seeded=*/true},
    {"redsync", "RedSync: bisection between the mean and the maximum of |g|",
     [](MagnitudePasses& p, double d, const Options&) { return redsync_threshold(p, d); }, 0x8c564b,
     ThresholdKind::estimate, SidcoVariant::exponential, nullptr, false, "bisection steps"},
    {"gaussianksgd", "GaussianKSGD: a normal quantile of g, corrected up to 3 times",
     [](MagnitudePasses& p, double d, const Options&) { return gaussianksgd_threshold(p, d); }, 0xff7f0e,
     ThresholdKind::estimate, SidcoVariant::exponential, nullptr, false,
     "thresholds placed: 1, plus one per correction"},
}};

bool offered(const ThresholdMethodInfo& row) { return !row.available || row.available(); }

}  // namespace

std::span<const ThresholdMethodInfo> threshold_methods() { return kMethods; }

std::vector<std::string> threshold_method_names() {
  std::vector<std::string> names;
  for (const auto& row : kMethods)
    if (offered(row)) names.emplace_back(row.name);
  return names;
}

const ThresholdMethodInfo& threshold_method(std::string_view name) {
  const auto it =
      std::find_if(kMethods.begin(), kMethods.end(), [&](const ThresholdMethodInfo& row) { return row.name == name; });
  if (it == kMethods.end() || !offered(*it))
    throw Error("unknown threshold method '" + std::string(name) + "': use " + join(threshold_method_names(), ", "));
  return *it;
}

ThresholdResult threshold_by_name(std::string_view method, MagnitudePasses& passes, double density, int stages,
                                  std::uint64_t seed, SidcoRule sidco) {
  const ThresholdMethodInfo& row = threshold_method(method);
  check_density(density);
  if (density >= 1.0) return keep_everything(std::string(row.name), passes);
  if (stages <= 0) stages = default_sidco_stages(density);
  ThresholdResult r = row.rule(passes, density, {stages, seed, sidco});
  if (row.stages.empty()) r.stages = 0;
  return r;
}

std::string_view method_name(SidcoVariant v) {
  for (const auto& row : kMethods)
    if (row.kind == ThresholdKind::sidco && row.variant == v) return row.name;
  throw Error("no threshold method runs this SIDCo variant");
}

}  // namespace gs::fitting
