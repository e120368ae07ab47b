#pragma once
// The fitting report behind `gradscope fit`: every requested SID fitted to x = |g| with its
// goodness of fit, and every requested threshold method at every density. Data are read only
// through MagnitudePasses, so the same report runs on any backend.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gs/base/join.hpp"
#include "gs/fitting/goodness.hpp"
#include "gs/fitting/passes.hpp"
#include "gs/fitting/threshold_methods.hpp"
#include "gs/fitting/thresholds.hpp"

namespace gs::fitting {

// The distributions fit_report fits, in the order it reports them.
inline const std::vector<std::string>& all_dists() {
  static const std::vector<std::string> names = {"exponential", "gamma", "gpareto", "normal"};
  return names;
}
// The threshold methods this build offers, from their table (gs/fitting/threshold_methods.hpp):
// made at the first call, so it is never read before the table exists.
inline const std::vector<std::string>& all_methods() {
  static const std::vector<std::string> names = threshold_method_names();
  return names;
}
// A list as a help text shows it: "a,b,c".
inline std::string comma_list(const std::vector<std::string>& names) { return join(names, ","); }
// Largest sample KS/AD/QQ are computed on; beyond it a uniform random subsample of this size.
inline constexpr std::uint64_t kDefaultKsMaxPoints = 1'000'000;

struct FitReportOptions {
  std::vector<double> densities{0.1, 0.01, 0.001};
  std::vector<std::string> dists = all_dists();      // a subset of all_dists()
  std::vector<std::string> methods = all_methods();  // a subset of all_methods()
  int stages = 0;                                    // SIDCo's stages; 0: default_sidco_stages(density) at each density
  std::uint64_t ks_max_points = kDefaultKsMaxPoints;
  std::uint64_t seed = 20240601;  // subsample for KS/AD and DGC's sample
  int qq_points = 19;
  SidcoRule sidco = {};  // SIDCo's stage rule and count correction (sidco_threshold)
};

// One SID fitted by maximum likelihood (exponential, gamma by Newton, gpareto by Grimshaw's
// profile likelihood, normal on x = |g|), with its goodness of fit on the (sub)sample.
struct DistFit {
  std::string dist;
  std::vector<std::pair<std::string, double>> params;
  double loglik = 0.0;
  double aic = 0.0;
  double ks_D = 0.0;
  double ks_p = 0.0;
  double ad_A2 = 0.0;
  std::uint64_t ks_n = 0;      // points KS/AD used
  bool ks_subsampled = false;  // true: a uniform random subsample of ks_n points
  std::vector<TailCheck> tail;
  std::vector<QQPoint> qq;
  std::string error;  // non-empty: the fit was impossible (e.g. all values equal); the rest unset
};

struct ThresholdEntry {
  ThresholdResult result;
  std::string error;  // non-empty: the method could not run on these data (result partly unset)
};

struct FitReport {
  std::uint64_t n = 0;         // elements of g
  std::uint64_t excluded = 0;  // zeros + non-finite, left out of every fit
  std::uint64_t zeros = 0;
  std::uint64_t nonfinite = 0;
  std::vector<DistFit> fits;
  std::vector<ThresholdEntry> thresholds;
};

// Validates the options (gs::Error for an unknown dist or method, a density outside (0, 1], stages
// < 1, max points 0), then fits and thresholds. At density 1 every method keeps every finite
// element (threshold 0, as the compressors at density 1), and the tail check predicts n. Data problems of one fit or
// method (too few values, all equal) are recorded in its error field rather than thrown. A failure of the device behind
// the passes (gs::DeviceFailure) is thrown: it ends the report, never becomes a row.
FitReport fit_report(MagnitudePasses& passes, const FitReportOptions& options = {});

}  // namespace gs::fitting
