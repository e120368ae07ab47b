#pragma once
// What the charts show for one vector (a layer, or the whole model) at one step, computed without
// Qt so tests can check it: the log-spaced histogram of x = |g| as a density, the fitted density of
// every SID from fit_report's parameters, and every threshold method at every density. The GUI fills
// it from the snapshot; the report fills its fits and thresholds from an analysis file's rows.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gs/analyzer/store.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/fitting/distributions.hpp"
#include "gs/fitting/report.hpp"
#include "gs/kernels/types.hpp"

namespace gs::analyzer::plots {

struct ViewOptions {
  fitting::FitReportOptions report;  // densities, dists, methods, stages, KS sample size
  int bins = 80;                     // histogram bins over [min x, max x]
  int curve_points = 240;            // points of each fitted density curve
  int qq_per_tail = 20;              // QQ points log-spaced in the upper tail (add_tail_qq)
  std::string backend = "auto";
};

// One fitted law's density, sampled at log-spaced x; points where the density is 0 (outside the
// support) are left out, since the axes are logarithmic.
struct DensityCurve {
  std::string dist;
  std::vector<double> x, pdf;
  std::string error;  // the fit failed: no curve
};

struct VectorView {
  std::string scope;
  std::int64_t step = 0;
  std::uint64_t n = 0;
  gs::kernels::LogHistogram histogram;  // bins over [min x, max x * (1 + 1e-9)]
  std::uint64_t finite_nonzero = 0;     // the values the density is normalised by
  // Non-empty bins only: geometric bin centre and density count / (finite_nonzero * width).
  std::vector<double> bin_center, bin_density;
  fitting::FitReport report;
  std::vector<DensityCurve> curves;
  double seconds = 0.0;  // time of the analysis (histogram + fit_report)
};

// The histogram alone (one pass), so the window can draw it before the fits are done.
// gs::Error when g holds no finite non-zero value, or the options are bad.
VectorView histogram_view(std::span<const float> g, const std::string& scope, std::int64_t step,
                          const ViewOptions& options);
// Adds fit_report, the density curves and the tail QQ points to a histogram_view of the same g.
void add_fits(VectorView& view, std::span<const float> g, const ViewOptions& options);
// The density curve of every fit in view.report over the histogram's support, from its first to
// its last non-empty bin (curve_points >= 2).
void add_curves(VectorView& view, int curve_points);
// Replaces every fit's QQ points by the body at p = 0.1, 0.2, 0.3, 0.4 and per_tail points whose
// tail probability 1 - p is log-spaced from 1/2 down to 1/m (m: the sample's size), so the tail a
// threshold at density 0.001 lies in is shown, not only the body that (j - 0.5)/19 covers.
// sorted: the ascending sample the fits' KS used (MagnitudePasses::sorted_sample); the sample
// quantile is interpolated between order statistics as fitting::qq_points does, the fitted one is
// the law's quantile (its complement in the tail).
void add_tail_qq(fitting::FitReport& report, std::span<const double> sorted, int per_tail);
// Both.
VectorView analyse_vector(std::span<const float> g, const std::string& scope, std::int64_t step,
                          const ViewOptions& options);

// The law a report fit describes (gs::Error for a failed fit or an unknown name).
// Its density is fitting::pdf(law, x).
fitting::Sid sid_from_fit(const fitting::DistFit& fit);

// The report's result for a method at a density (relative tolerance 1e-9 on the density), or nullptr.
const fitting::ThresholdEntry* find_threshold(const fitting::FitReport& report, const std::string& method,
                                              double density);
const fitting::DistFit* find_fit(const fitting::FitReport& report, const std::string& dist);

// The fitting report an analysis file stores for (step, scope): fits with their parameters under
// fit_report's names, goodness of fit and QQ points, and every method at every density. Empty fits
// and thresholds when the file has no rows for it.
fitting::FitReport report_from_rows(const std::vector<FitRow>& fits, const std::vector<QQRow>& qq,
                                    const std::vector<ThresholdRow>& thresholds, std::int64_t step,
                                    const std::string& scope);

}  // namespace gs::analyzer::plots
