// The fitting report: fits, goodness of fit, tail checks, thresholds.
#include "gs/fitting/report.hpp"

#include <algorithm>
#include <sstream>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/estimators.hpp"

namespace gs::fitting {
namespace {

void validate(const FitReportOptions& o) {
  auto known = [](const std::vector<std::string>& all, const std::string& v) {
    return std::find(all.begin(), all.end(), v) != all.end();
  };
  auto list = [](const std::vector<std::string>& all) { return join(all, ", "); };
  for (const auto& d : o.dists)
    if (!known(all_dists(), d)) throw Error("unknown distribution '" + d + "': use " + list(all_dists()));
  for (const auto& m : o.methods) threshold_method(m);  // gs::Error listing the known ones
  for (double r : o.densities) check_density(r);        // (0, 1], as every compressor takes
  if (o.stages < 0) throw Error("SIDCo stages must be at least 1 (or 0: by density)");
  if (o.ks_max_points == 0) throw Error("the KS sample size must be at least 1");
}

// A fitted law and its log-likelihood over every non-zero finite value.
struct Fitted {
  Sid law;
  double loglik;
};

// sorted: the KS sample, which also brackets the generalized-Pareto search (few full passes).
// The generalized Pareto's likelihood is the profile's maximum the search found (the closed form
// -n ln sigma - (1 + 1/xi) sum ln(1 + xi x/sigma) at the same law, without another pass).
Fitted fit_by_name(const std::string& dist, MagnitudePasses& passes, const MagnitudeStats& s,
                   std::span<const double> sorted) {
  if (dist == "gpareto") {
    const GpMleResult gp = fit_gpareto_mle(passes, sorted);
    return {gp.dist, gp.loglik};
  }
  const Sid law = dist == "exponential" ? Sid(fit_exponential(s))
                  : dist == "gamma"     ? Sid(fit_gamma_mle(s))
                                        : Sid(fit_normal(s));
  return {law, loglik(law, passes, s)};
}

}  // namespace

// A fit or a method that fails on this vector (too few values, all equal, a numerical failure of
// Boost.Math) becomes its row's error; the report goes on. A failure of the device behind the
// passes is no property of the vector, so it ends the report: gs::DeviceFailure (base/, the base
// of kernels' DeviceError) is the one type let through. A marker type rather than "rethrow all
// but the fit failures" because the fit failures are no one type (gs::Error and Boost.Math's
// std::domain_error, std::overflow_error, ...), and because fitting/ cannot name kernels/.
FitReport fit_report(MagnitudePasses& passes, const FitReportOptions& o) {
  validate(o);
  FitReport r;
  const MagnitudeStats s = passes.stats();
  r.n = passes.size();
  r.zeros = s.zeros;
  r.nonfinite = s.nonfinite;
  r.excluded = s.excluded();

  std::vector<double> sample;
  bool subsampled = false;
  if (!o.dists.empty() && s.count > 0) sample = passes.sorted_sample(o.ks_max_points, o.seed, &subsampled);

  for (const auto& dist : o.dists) {
    DistFit f;
    f.dist = dist;
    try {
      const auto [d, ll] = fit_by_name(dist, passes, s, sample);
      f.params = params(d);
      f.loglik = ll;
      f.aic = aic(f.loglik, parameter_count(d));
      f.ks_n = sample.size();
      f.ks_subsampled = subsampled;
      const EdfStatistics edf = edf_statistics(d, sample);
      f.ks_D = edf.ks_D;
      f.ks_p = ks_pvalue(f.ks_D, sample.size());
      f.ad_A2 = edf.ad_A2;
      for (double density : o.densities) f.tail.push_back(tail_check(d, passes, s, density));
      f.qq = qq_points(d, sample, o.qq_points);
    } catch (const DeviceFailure&) {
      throw;                             // the machine failed, not the fit: never a row (see below)
    } catch (const std::exception& e) {  // gs::Error, or a numerical failure of Boost.Math
      f.error = e.what();
    }
    r.fits.push_back(std::move(f));
  }
  for (const auto& method : o.methods)
    for (double density : o.densities) {
      ThresholdEntry t;
      t.result.method = method;
      t.result.density = density;
      try {
        t.result = threshold_by_name(method, passes, density, o.stages, o.seed, o.sidco);
      } catch (const DeviceFailure&) {
        throw;
      } catch (const std::exception& e) {
        t.error = e.what();
      }
      r.thresholds.push_back(std::move(t));
    }
  return r;
}

}  // namespace gs::fitting
