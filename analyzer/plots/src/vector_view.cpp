#include "gs/analyzer/plots/vector_view.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <variant>

#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"

namespace gs::analyzer::plots {

fitting::Sid sid_from_fit(const fitting::DistFit& fit) {
  if (!fit.error.empty()) throw Error("the " + fit.dist + " fit failed: " + fit.error);
  std::vector<double> values;
  for (const auto& name : fitting::parameter_names(fit.dist)) {
    const auto it = std::find_if(fit.params.begin(), fit.params.end(), [&](const auto& p) { return p.first == name; });
    if (it == fit.params.end()) throw Error("fit of " + fit.dist + " has no parameter '" + name + "'");
    values.push_back(it->second);
  }
  return fitting::make_sid(fit.dist, values);
}

const fitting::ThresholdEntry* find_threshold(const fitting::FitReport& report, const std::string& method,
                                              double density) {
  for (const auto& t : report.thresholds)
    if (t.result.method == method && std::abs(t.result.density - density) <= 1e-9 * density) return &t;
  return nullptr;
}

const fitting::DistFit* find_fit(const fitting::FitReport& report, const std::string& dist) {
  for (const auto& f : report.fits)
    if (f.dist == dist) return &f;
  return nullptr;
}

VectorView analyse_vector(std::span<const float> g, const std::string& scope, std::int64_t step,
                          const ViewOptions& options) {
  const Stopwatch watch;
  VectorView view = histogram_view(g, scope, step, options);
  add_fits(view, g, options);
  view.seconds = watch.seconds();
  return view;
}

VectorView histogram_view(std::span<const float> g, const std::string& scope, std::int64_t step,
                          const ViewOptions& options) {
  if (options.bins < 1 || options.curve_points < 2) throw Error("histogram bins must be >= 1 and curve points >= 2");
  const Stopwatch watch;
  VectorView view;
  view.scope = scope;
  view.step = step;
  view.n = g.size();
  const fitting::MagnitudeStats s = kernels::cpu::stats(g);
  if (s.count == 0)
    throw Error("'" + scope + "' at step " + std::to_string(step) +
                " holds no finite non-zero gradient value: nothing to plot");
  view.finite_nonzero = s.count;
  // hi just above the maximum so the largest value falls in the last bin, not in `above`.
  double lo = s.min, hi = s.max * (1.0 + 1e-9);
  if (!(hi > lo)) {  // all values equal: a one-decade window around them
    lo = s.min / std::sqrt(10.0);
    hi = s.min * std::sqrt(10.0);
  }
  view.histogram = kernels::cpu::log_histogram(g, lo, hi, options.bins);
  const auto& h = view.histogram;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] == 0) continue;
    const double a = h.edge(i), b = h.edge(i + 1);
    view.bin_center.push_back(std::sqrt(a * b));
    view.bin_density.push_back(double(h.counts[i]) / (double(s.count) * (b - a)));
  }
  view.seconds = watch.seconds();
  return view;
}

void add_fits(VectorView& view, std::span<const float> g, const ViewOptions& options) {
  const Stopwatch watch;
  auto passes = kernels::make_passes(g, kernels::resolve_backend(options.backend));
  view.report = fitting::fit_report(*passes, options.report);
  if (!view.report.fits.empty() && options.qq_per_tail > 0) {
    // The same sample fit_report's KS and QQ used (same size limit and seed).
    bool subsampled = false;
    const std::vector<double> sorted =
        passes->sorted_sample(options.report.ks_max_points, options.report.seed, &subsampled);
    if (!sorted.empty()) add_tail_qq(view.report, sorted, options.qq_per_tail);
  }
  add_curves(view, options.curve_points);
  view.seconds += watch.seconds();
}

void add_tail_qq(fitting::FitReport& report, std::span<const double> sorted, int per_tail) {
  if (per_tail < 2 || sorted.empty()) throw Error("tail QQ needs 2 points per tail and a sample");
  const double last = double(sorted.size() - 1);
  const double q_min = std::min(0.5, 1.0 / double(sorted.size()));
  auto sample_at = [&](double p) {
    const double pos = p * last;
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
  };
  for (auto& fit : report.fits) {
    if (!fit.error.empty()) continue;
    const fitting::Sid law = sid_from_fit(fit);
    fit.qq.clear();
    // The body in steps of 0.1: the lower tail (tiny |g|, many decades on a log axis) would
    // squeeze the upper one, where the thresholds are, into a corner.
    for (int k = 1; k <= 4; ++k) {
      const double p = 0.1 * k;
      fit.qq.push_back({p, fitting::quantile(law, p), sample_at(p)});
    }
    // The upper tail: q = 1 - p log-spaced from 1/2 down to 1/m.
    for (int k = 0; k < per_tail; ++k) {
      const double q = 0.5 * std::pow(q_min / 0.5, double(k) / double(per_tail - 1));
      fit.qq.push_back({1.0 - q, fitting::quantile_c(law, q), sample_at(1.0 - q)});
    }
  }
}

void add_curves(VectorView& view, int curve_points) {
  if (curve_points < 2) throw Error("curve points must be >= 2");
  const auto& h = view.histogram;
  // Over the histogram's support (its first to its last non-empty bin) only: beyond it there is
  // nothing the curve could be compared with.
  std::size_t first = 0, last = h.counts.size();
  while (first < h.counts.size() && h.counts[first] == 0) ++first;
  while (last > first && h.counts[last - 1] == 0) --last;
  const double lo = first < last ? h.edge(first) : h.lo, hi = first < last ? h.edge(last) : h.hi;
  view.curves.clear();
  for (const auto& fit : view.report.fits) {
    DensityCurve curve;
    curve.dist = fit.dist;
    if (!fit.error.empty()) {
      curve.error = fit.error;
    } else {
      const fitting::Sid law = sid_from_fit(fit);
      const double span = hi / lo;
      for (int j = 0; j < curve_points; ++j) {
        const double x = lo * std::pow(span, double(j) / double(curve_points - 1));
        const double y = fitting::pdf(law, x);
        if (y > 0.0 && std::isfinite(y)) {
          curve.x.push_back(x);
          curve.pdf.push_back(y);
        }
      }
    }
    view.curves.push_back(std::move(curve));
  }
}

fitting::FitReport report_from_rows(const std::vector<FitRow>& fits, const std::vector<QQRow>& qq,
                                    const std::vector<ThresholdRow>& thresholds, std::int64_t step,
                                    const std::string& scope) {
  fitting::FitReport report;
  for (const auto& f : fits) {
    if (f.step != step || f.scope != scope) continue;
    fitting::DistFit fit = to_dist_fit(f);
    if (f.error.empty()) {
      for (const auto& q : qq)
        if (q.step == step && q.scope == scope && q.dist == f.dist)
          fit.qq.push_back({q.probability, q.fitted, q.sample});
    }
    report.fits.push_back(std::move(fit));
  }
  for (const auto& t : thresholds) {
    if (t.step != step || t.scope != scope) continue;
    fitting::ThresholdEntry entry;
    entry.result.method = t.method;
    entry.result.density = t.density;
    entry.result.threshold = t.threshold;
    entry.result.stages = t.stages;
    entry.result.selected = t.selected;
    entry.result.quality = t.quality;
    entry.error = t.error;
    report.thresholds.push_back(std::move(entry));
  }
  return report;
}

}  // namespace gs::analyzer::plots
