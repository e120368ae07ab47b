#pragma once
// Series over training that the charts draw: the KS statistic per SID, and estimation quality and
// SIDCo stages per method and density, one point per step. The GUI fills them from an analysis file
// or from fit_report run on the fly; the report from an analysis file, for one scope or for a
// whole layer kind.
#include <cstdint>
#include <string>
#include <vector>

#include "gs/analyzer/store.hpp"

namespace gs::analyzer::plots {

struct KsPoint {
  std::int64_t step = 0;
  std::string dist;
  double ks_D = 0.0;  // NaN: the fit failed
};
struct MethodPoint {
  std::int64_t step = 0;
  std::string method;
  double density = 0.0;
  double quality = 0.0;  // (selected/n)/density; NaN: the method failed
  int stages = 0;
};
struct TrainingSeries {
  std::string scope;                // a scope, or the layer kind the points summarise
  std::string origin;               // where the numbers came from, for the status bar
  std::vector<std::int64_t> steps;  // training steps present, ascending
  std::vector<KsPoint> ks;
  std::vector<MethodPoint> methods;
};

// Which rows of an analysis file a series summarises: one scope's, or every scope of a layer kind
// (then each point is the median over the kind's scopes at that step, failed fits and methods left
// out; NaN when all failed).
enum class SeriesOf { scope, kind };
TrainingSeries series_from_rows(const std::vector<FitRow>& fits, const std::vector<ThresholdRow>& thresholds,
                                const std::string& name, SeriesOf of = SeriesOf::scope);

}  // namespace gs::analyzer::plots
