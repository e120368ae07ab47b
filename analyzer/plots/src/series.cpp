#include "gs/analyzer/plots/series.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "gs/analyzer/summary.hpp"
#include "gs/base/quantile.hpp"

namespace gs::analyzer::plots {

TrainingSeries series_from_rows(const std::vector<FitRow>& fits, const std::vector<ThresholdRow>& thresholds,
                                const std::string& name, SeriesOf of) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const auto matches = [&](const std::string& scope, const std::string& kind) {
    return of == SeriesOf::scope ? scope == name : kind == name;
  };
  TrainingSeries out;
  out.scope = name;
  std::set<std::int64_t> steps;
  // Values per point; one per scope, so a scope's series keeps its own numbers exactly.
  std::map<std::pair<std::int64_t, std::string>, std::vector<double>> ks;
  struct Values {
    std::vector<double> quality, stages;
  };
  std::map<std::tuple<std::int64_t, std::string, double>, Values> methods;
  for (const auto& f : fits) {
    if (!matches(f.scope, f.kind)) continue;
    steps.insert(f.step);
    ks[{f.step, f.dist}].push_back(f.error.empty() ? f.ks_D : kNaN);
  }
  for (const auto& t : thresholds) {
    if (!matches(t.scope, t.kind)) continue;
    steps.insert(t.step);
    Values& v = methods[{t.step, t.method, t.density}];
    v.quality.push_back(t.error.empty() ? t.quality : kNaN);
    v.stages.push_back(double(t.stages));
  }
  out.steps.assign(steps.begin(), steps.end());
  for (const auto& [key, values] : ks) out.ks.push_back({key.first, key.second, gs::quantile(values, 0.5)});
  for (const auto& [key, v] : methods) {
    const double stages = gs::quantile(v.stages, 0.5);
    out.methods.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), gs::quantile(v.quality, 0.5),
                           std::isfinite(stages) ? int(std::lround(stages)) : 0});
  }
  return out;
}

}  // namespace gs::analyzer::plots
