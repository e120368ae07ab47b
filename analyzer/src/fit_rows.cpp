// A fit of fitting's report as a row of the store's fits table, and back (store.hpp).
#include <limits>
#include <utility>

#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"

namespace gs::analyzer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The goodness-of-fit figures a row and a fit share, member for member.
constexpr std::pair<double FitRow::*, double fitting::DistFit::*> kShared[] = {
    {&FitRow::loglik, &fitting::DistFit::loglik},
    {&FitRow::aic, &fitting::DistFit::aic},
    {&FitRow::ks_D, &fitting::DistFit::ks_D},
    {&FitRow::ks_p, &fitting::DistFit::ks_p},
    {&FitRow::ad_A2, &fitting::DistFit::ad_A2}};

}  // namespace

FitRow to_fit_row(const fitting::DistFit& f, std::int64_t step, const std::string& scope, const std::string& kind) {
  FitRow row{step, scope, kind, f.dist, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0, false, f.error};
  if (!f.error.empty()) return row;
  if (!f.params.empty()) row.param1 = f.params[0].second;
  if (f.params.size() > 1) row.param2 = f.params[1].second;
  for (const auto& [in_row, in_fit] : kShared) row.*in_row = f.*in_fit;
  row.ks_n = f.ks_n;
  row.ks_subsampled = f.ks_subsampled;
  return row;
}

fitting::DistFit to_dist_fit(const FitRow& f) {
  fitting::DistFit fit;
  fit.dist = f.dist;
  fit.error = f.error;
  if (!f.error.empty()) return fit;
  const auto& names = fitting::parameter_names(f.dist);  // gs::Error for an unknown distribution
  const double values[] = {f.param1, f.param2};
  for (std::size_t i = 0; i < names.size(); ++i) fit.params.emplace_back(names[i], values[i]);
  for (const auto& [in_row, in_fit] : kShared) fit.*in_fit = f.*in_row;
  fit.ks_n = f.ks_n;
  fit.ks_subsampled = f.ks_subsampled;
  return fit;
}

std::string param_names_attribute() {
  std::string out;
  for (const auto& dist : fitting::all_dists()) {
    std::vector<std::string> names = fitting::parameter_names(dist);
    names.resize(2, "-");
    out += (out.empty() ? "" : ";") + dist + ":" + names[0] + "," + names[1];
  }
  return out;
}

}  // namespace gs::analyzer
