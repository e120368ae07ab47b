// Estimators: closed forms from MagnitudeStats, gamma Newton MLE, generalized-Pareto profile MLE.
#include "gs/fitting/estimators.hpp"

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>
#include <boost/math/tools/minima.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <span>
#include <vector>

#include "gs/base/error.hpp"
#include "gs/fitting/formulas.hpp"

namespace gs::fitting {
namespace {

void require_count(const MagnitudeStats& s, std::uint64_t need, const char* fn) {
  if (s.count < need) {
    std::ostringstream os;
    os << fn << ": needs at least " << need << " finite non-zero value(s), got " << s.count << " (" << s.zeros
       << " zero, " << s.nonfinite << " non-finite excluded)";
    throw Error(os.str());
  }
}

// s = ln(mean) - mean(ln x) >= 0 by Jensen; 0 when all values are equal.
double gamma_s(const MagnitudeStats& s, const char* fn) {
  require_count(s, 2, fn);
  const double v = std::log(s.mean()) - s.mean_log();
  if (!(s.max > s.min) || !(v > 0.0) || !std::isfinite(v)) {
    std::ostringstream os;
    os << fn << ": all " << s.count << " values are equal (ln(mean) - mean(ln x) = " << v
       << "): a gamma law needs spread";
    throw Error(os.str());
  }
  return v;
}

using formula::gamma_closed_form_shape;

}  // namespace

Exponential fit_exponential(const MagnitudeStats& s) {
  require_count(s, 1, "fit_exponential");
  return Exponential(s.mean());
}

Gamma fit_gamma_closed_form(const MagnitudeStats& s) {
  const double a = gamma_closed_form_shape(gamma_s(s, "fit_gamma_closed_form"));
  return Gamma(a, s.mean() / a);
}

Gamma fit_gamma_mle(const MagnitudeStats& s) {
  const double target = gamma_s(s, "fit_gamma_mle");
  // f(a) = ln a - psi(a) - s is convex and decreasing, so Newton from the closed form converges
  // monotonically; the closed form is already within about 1.5% of the root.
  double a = gamma_closed_form_shape(target);
  for (int it = 0; it < 100; ++it) {
    const double f = std::log(a) - boost::math::digamma(a) - target;
    const double df = 1.0 / a - boost::math::trigamma(a);
    if (!(df < 0.0)) break;  // trigamma(a) > 1/a always; rounding at huge a only
    double next = a - f / df;
    if (!(next > 0.0)) next = 0.5 * a;
    const double step = std::fabs(next - a);
    a = next;
    if (step <= 4.0 * std::numeric_limits<double>::epsilon() * a) break;
  }
  return Gamma(a, s.mean() / a);
}

Normal fit_normal(const MagnitudeStats& s) {
  require_count(s, 2, "fit_normal");
  const double sd = std::sqrt(s.variance());
  if (!(s.max > s.min) || !(sd > 0.0)) throw Error("fit_normal: all values are equal: a normal law needs spread");
  return Normal(s.mean(), sd);
}

Normal fit_normal_signed(const MagnitudeStats& s) {
  const std::uint64_t n = s.count + s.zeros;
  if (n < 2) throw Error("fit_normal_signed: needs at least 2 finite values");
  const double mu = s.sum_signed / double(n);
  const double var = s.sum_sq / double(n) - mu * mu;
  if (!(var > 0.0)) throw Error("fit_normal_signed: all values are equal: a normal law needs spread");
  return Normal(mu, std::sqrt(var));
}

GeneralizedPareto fit_gpareto_moments(const MagnitudeStats& s) {
  require_count(s, 2, "fit_gpareto_moments");
  const double v = s.variance();
  if (!(s.max > s.min) || !(v > 0.0)) throw Error("fit_gpareto_moments: all values are equal: variance is 0");
  double xi = 0.0, sigma = 0.0;
  formula::gpareto_moments(s.mean(), v, xi, sigma);
  return GeneralizedPareto(xi, sigma);
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

MagnitudeStats gp_data(MagnitudePasses& passes, double threshold, double shift) {
  const MagnitudeStats y = passes.stats_above(threshold, shift);
  if (y.count < 2 || !(y.max > y.min) || !(y.max > 0.0)) {
    std::ostringstream os;
    os << "fit_gpareto_mle: needs at least 2 distinct positive values above " << threshold << ", got " << y.count;
    throw Error(os.str());
  }
  return y;
}

// Grimshaw's profile from the sums at theta over n values with mean ymean.
double gp_profile(double n, double ymean, double theta, double sum_log1p) {
  if (theta == 0.0) return -n * (std::log(ymean) + 1.0);
  const double xi = sum_log1p / n;
  const double ratio = xi / theta;
  if (!std::isfinite(xi) || !(ratio > 0.0)) return kNegInf;
  return -n * (std::log(ratio) + xi + 1.0);
}

struct ProfileMax {
  double theta;
  double loglik;
  bool interior;  // false: the best grid point was an end of the search range
};

// Maximises profile(theta) over (lower, inf), lower = -1/max(y): a log-spaced grid on both sides
// of 0, theta = +-10^e / mean(y) for e from -6 to +8 by half decades (negatives above lower), plus
// points approaching lower geometrically; then Brent between the best point's neighbours.
template <class Profile>
ProfileMax maximise_profile(Profile&& profile, double lower, double ymean) {
  std::vector<double> grid;
  for (int j = 12; j >= 1; --j) grid.push_back(lower * (1.0 - std::pow(10.0, -0.5 * j)));
  for (int e = 16; e >= -12; --e) {
    const double t = -std::pow(10.0, 0.5 * e) / ymean;
    if (t > lower * (1.0 - std::pow(10.0, -0.5))) grid.push_back(t);
  }
  grid.push_back(0.0);
  for (int e = -12; e <= 16; ++e) grid.push_back(std::pow(10.0, 0.5 * e) / ymean);
  // The negative side's two lists can interleave: sort.
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());

  std::size_t best = 0;
  std::vector<double> value(grid.size());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    value[i] = profile(grid[i]);
    if (value[i] > value[best]) best = i;
  }
  ProfileMax r{grid[best], value[best], best > 0 && best + 1 < grid.size()};
  if (r.interior) {
    auto neg = [&](double t) { return -profile(t); };
    const auto [t, v] = boost::math::tools::brent_find_minima(neg, grid[best - 1], grid[best + 1],
                                                              std::numeric_limits<double>::digits / 2);
    if (-v >= r.loglik) r = {t, -v, true};
  }
  return r;
}

// The law at theta from xi(theta) = mean ln(1 + theta y) (theta = 0: the exponential).
GpMleResult gp_at(const MagnitudeStats& y, double theta, double xi, double loglik, int npasses, bool converged) {
  if (theta == 0.0) return {GeneralizedPareto(0.0, y.mean()), loglik, y.count, npasses, converged};
  return {GeneralizedPareto(xi, xi / theta), loglik, y.count, npasses, converged};
}

// The same when the search kept only the profile's value at theta: one more pass for xi.
GpMleResult gp_result(MagnitudePasses& passes, double threshold, double shift, const MagnitudeStats& y, double theta,
                      double loglik, int npasses, bool converged) {
  if (theta == 0.0) return gp_at(y, theta, 0.0, loglik, npasses, converged);
  const GpSums g = passes.gp_sums(theta, threshold, shift);
  return gp_at(y, theta, g.sum_log1p / double(y.count), loglik, npasses + 1, converged);
}

// The search of maximise_profile with every profile value a full pass (gp_sums).
GpMleResult gp_mle_full(MagnitudePasses& passes, double threshold, double shift, const MagnitudeStats& y) {
  const double n = double(y.count), ymean = y.mean();
  int npasses = 0;
  auto profile = [&](double theta) {
    if (theta == 0.0) return gp_profile(n, ymean, 0.0, 0.0);
    ++npasses;
    return gp_profile(n, ymean, theta, passes.gp_sums(theta, threshold, shift).sum_log1p);
  };
  const ProfileMax m = maximise_profile(profile, -1.0 / y.max, ymean);
  return gp_result(passes, threshold, shift, y, m.theta, m.loglik, npasses, m.interior);
}

// Points of the host sample the bracketing search uses (the kGpTopPoints largest as they are,
// evenly spaced order statistics of the rest): about 100 profile evaluations over them locate the
// maximum well inside Newton's basin, and Newton on the full data then makes the result the exact
// MLE whatever the count. A thinned sample keeps the search a small part of the per-layer analysis
// (docs/BENCHMARKS.md, "Analysis throughput", the gpareto fit); the Newton passes stay under 12
// (tests/fitting/test_estimators.cpp, GpMleBracketedOnTheSampleMatchesTheFullSearch).
constexpr std::size_t kGpBracketPoints = std::size_t(1) << 14;
constexpr std::size_t kGpTopPoints = 256;

// Profile value and its first two derivatives in theta from one gp_sums pass. With
// I1 = mean 1/(1+theta y), I2 = mean 1/(1+theta y)^2 and xi = mean ln(1+theta y):
//   xi' = (1 - I1)/theta,  xi'' = -(1 - 2 I1 + I2)/theta^2,
//   l = -n (ln(xi/theta) + xi + 1),  l' = -n (xi' (1/xi + 1) - 1/theta),
//   l'' = -n (xi'' (1/xi + 1) - xi'^2/xi^2 + 1/theta^2).
struct ProfilePoint {
  double theta = 0.0;
  double xi = 0.0;  // xi(theta): the law's shape at this point, without another pass
  double l = kNegInf, dl = 0.0, d2l = 0.0;
};
ProfilePoint profile_point(MagnitudePasses& passes, double threshold, double shift, double n, double ymean,
                           double theta) {
  const GpSums g = passes.gp_sums(theta, threshold, shift);
  ProfilePoint p;
  p.theta = theta;
  p.l = gp_profile(n, ymean, theta, g.sum_log1p);
  if (!std::isfinite(p.l)) return p;
  const double xi = g.sum_log1p / n, i1 = g.sum_inv / n, i2 = g.sum_inv2 / n;
  p.xi = xi;
  const double d1 = (1.0 - i1) / theta, d2 = -(1.0 - 2.0 * i1 + i2) / (theta * theta);
  p.dl = -n * (d1 * (1.0 / xi + 1.0) - 1.0 / theta);
  p.d2l = -n * (d2 * (1.0 / xi + 1.0) - d1 * d1 / (xi * xi) + 1.0 / (theta * theta));
  return p;
}

// The sample's y = x - shift for x > threshold, thinned: the largest kGpTopPoints as they are
// (they alone decide the profile near theta = -1/max y, where bounded tails have their maximum)
// and evenly spaced order statistics of the rest, each weighing for the values it stands for;
// plus the data's own maximum (y_max) when the sample (a subsample) lacks it.
struct WeightedSample {
  std::vector<double> ys, weight;
};
WeightedSample thin_sample(std::span<const double> sorted_sample, double threshold, double shift, double y_max) {
  const auto first = std::upper_bound(sorted_sample.begin(), sorted_sample.end(), threshold);
  const auto avail = static_cast<std::size_t>(sorted_sample.end() - first);
  const std::size_t take = std::min(avail, kGpBracketPoints);
  const std::size_t top = std::min(take, kGpTopPoints);
  const std::size_t rest = avail - top, spaced = take - top;
  WeightedSample w;
  w.ys.reserve(take + 1);
  w.weight.reserve(take + 1);
  for (std::size_t k = 0; k < spaced; ++k) {
    w.ys.push_back(first[static_cast<std::ptrdiff_t>((double(k) + 0.5) * double(rest) / double(spaced))] - shift);
    w.weight.push_back(double(rest) / double(spaced));
  }
  for (std::size_t k = avail - top; k < avail; ++k) {
    w.ys.push_back(first[static_cast<std::ptrdiff_t>(k)] - shift);
    w.weight.push_back(1.0);
  }
  if (!w.ys.empty() && y_max > w.ys.back()) {
    w.ys.push_back(y_max);
    w.weight.push_back(1.0);
  }
  return w;
}

// Safeguarded Newton on the full data from theta = start: every accepted step raises the
// likelihood; a step that would not is halved; a step beyond the support's bound (lower) stops
// halfway to it. `at` evaluates a point (one pass); converged says whether it settled.
template <class At>
ProfilePoint newton_on_data(const At& at, double start, double lower, bool& converged) {
  ProfilePoint cur = at(start);
  converged = false;
  for (int it = 0; it < 20 && std::isfinite(cur.l); ++it) {
    double step = cur.d2l < 0.0 ? -cur.dl / cur.d2l : std::copysign(0.25 * std::fabs(cur.theta), cur.dl);
    if (!std::isfinite(step)) break;
    if (std::fabs(step) <= 1e-10 * std::fabs(cur.theta)) {
      converged = true;
      break;
    }
    if (cur.theta + step <= lower) step = 0.5 * (lower - cur.theta);
    ProfilePoint next = at(cur.theta + step);
    for (int half = 0; half < 30 && !(next.l >= cur.l); ++half) {
      step *= 0.5;
      if (std::fabs(step) <= 1e-10 * std::fabs(cur.theta)) break;
      next = at(cur.theta + step);
    }
    if (!(next.l >= cur.l)) {  // no step upward at all: cur is the maximum to rounding
      converged = true;
      break;
    }
    cur = next;
  }
  return cur;
}

}  // namespace

GpMleResult fit_gpareto_mle(MagnitudePasses& passes, double threshold, double shift) {
  return gp_mle_full(passes, threshold, shift, gp_data(passes, threshold, shift));
}

GpMleResult fit_gpareto_mle(MagnitudePasses& passes, std::span<const double> sorted_sample, double threshold,
                            double shift) {
  const MagnitudeStats y = gp_data(passes, threshold, shift);
  const double n = double(y.count), ymean = y.mean(), lower = -1.0 / y.max;

  const WeightedSample w = thin_sample(sorted_sample, threshold, shift, y.max);
  const std::vector<double>& ys = w.ys;
  const std::vector<double>& weight = w.weight;
  if (ys.size() < 2 || !(ys.back() > ys.front()) || !(ys.front() > 0.0))
    return gp_mle_full(passes, threshold, shift, y);

  // 1. Bracket and locate the maximum on the sample (host memory, no pass over the data).
  double ns = 0.0, smean = 0.0;
  for (std::size_t k = 0; k < ys.size(); ++k) {
    ns += weight[k];
    smean += weight[k] * ys[k];
  }
  smean /= ns;
  auto sample_profile = [&](double theta) {
    if (theta == 0.0) return gp_profile(ns, smean, 0.0, 0.0);
    double s = 0.0;
    for (std::size_t k = 0; k < ys.size(); ++k) s += weight[k] * std::log1p(theta * ys[k]);
    return gp_profile(ns, smean, theta, s);
  };
  const ProfileMax start = maximise_profile(sample_profile, lower, ymean);
  // A boundary maximum (or the exponential point itself) gets the full search.
  if (!start.interior || start.theta == 0.0) return gp_mle_full(passes, threshold, shift, y);

  // 2. Newton on the full data.
  int npasses = 0;
  auto at = [&](double theta) {
    ++npasses;
    return profile_point(passes, threshold, shift, n, ymean, theta);
  };
  bool converged = false;
  const ProfilePoint cur = newton_on_data(at, start.theta, lower, converged);
  if (!converged || !std::isfinite(cur.l) || cur.theta == 0.0) {
    GpMleResult full = gp_mle_full(passes, threshold, shift, y);
    full.passes += npasses;
    return full;
  }
  return gp_at(y, cur.theta, cur.xi, cur.l, npasses, true);
}

}  // namespace gs::fitting
