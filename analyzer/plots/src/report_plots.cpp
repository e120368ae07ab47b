// The report's plots: which charts, of which rows, under which stable names, drawn off-screen.
#include "gs/analyzer/plots/report_plots.hpp"

#include "gs/base/quantile.hpp"

#include <algorithm>
#include <cctype>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <QApplication>
#include <qcustomplot.h>

#include "gs/analyzer/plots/series.hpp"
#include "gs/analyzer/plots/vector_view.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/threshold_methods.hpp"

namespace gs::analyzer::plots {
namespace {

namespace fs = std::filesystem;

// Logical size of every image; saved at 1.5x for sharp text.
constexpr int kWidth = 960, kHeight = 540;
constexpr double kScale = 1.5;

struct Planned {
  PlotImage image;
  LegendPlace legend = LegendPlace::inside;
  std::function<void(QCustomPlot*)> draw;
};

// "conv weight" -> "conv-weight": lower-case letters, digits, '.', runs of others as one '-'.
std::string slug(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '.')
      out += char(std::tolower(c));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string scope_words(const std::string& scope) {
  return scope == kModelScope ? "the whole model" : "`" + scope + "`";
}
std::string scope_title(const std::string& scope) { return scope == kModelScope ? std::string(kKindModel) : scope; }

// The vector the per-vector plots show: the whole model when analysed, else the largest layer
// (the first of equal ones), at the last step that holds it.
struct Focus {
  std::string scope, kind;
  std::int64_t step = 0;
  std::uint64_t n = 0;
};
std::optional<Focus> choose_focus(const std::vector<VectorRow>& vectors) {
  const VectorRow* pick = nullptr;
  for (const auto& v : vectors) {
    if (v.scope == kModelScope) {
      pick = &v;
      break;
    }
    if (!pick || v.n > pick->n) pick = &v;
  }
  if (!pick) return std::nullopt;
  Focus f{pick->scope, pick->kind, pick->step, pick->n};
  for (const auto& v : vectors)
    if (v.scope == f.scope && v.step > f.step) f.step = v.step, f.n = v.n;
  return f;
}

// The focus vector's values from the snapshot the analysis was made of, or a note saying why not.
std::optional<std::vector<float>> read_focus(const AnalysisReader& reader, const Focus& focus, std::string& note) {
  const SourceIdentity& src = reader.source();
  try {
    data::SnapshotReader snap(src.path);
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
    for (const auto& l : snap.layers()) shapes.emplace_back(l.name, l.shape);
    if (source_identity(src.path, snap.meta().created, shapes, snap.meta().model) != src) {
      note = "Histogram skipped: the snapshot `" + src.path +
             "` is not the file this analysis was made of (its creation time or layers differ).";
      return std::nullopt;
    }
    const VectorChoice choice{snap.step_index(focus.step), focus.step, focus.scope, focus.kind};
    return read_vector(snap, choice);
  } catch (const Error& e) {
    note = "Histogram skipped: the snapshot could not be read (" + std::string(e.what()) + ").";
    return std::nullopt;
  }
}

}  // namespace

void ensure_application() {
  if (QCoreApplication::instance()) {
    if (!qobject_cast<QApplication*>(QCoreApplication::instance()))
      throw Error(
          "plots need a QApplication, but this process runs a QCoreApplication: "
          "create a QApplication instead");
    return;
  }
  // No display is needed or wanted: the plots are only ever saved to files. The platform goes on
  // the command line, which wins over QT_QPA_PLATFORM (a display platform set there would abort
  // on a headless machine).
  static int argc = 3;
  static char name[] = "gradscope", flag[] = "-platform", platform[] = "offscreen";
  static char* argv[] = {name, flag, platform, nullptr};
  // Qt switches the C locale to the user's; keep the process's own, so printf-formatted numbers
  // (the report, CSV, messages) keep a '.' decimal point.
  const std::string locale = std::setlocale(LC_ALL, nullptr);
  // Start-up chatter about the desktop session (e.g. "XDG_RUNTIME_DIR not set") means nothing to a
  // command that only writes files: only errors pass while the application starts.
  const QtMessageHandler previous =
      qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& message) {
        if (type == QtCriticalMsg || type == QtFatalMsg)
          std::fprintf(stderr, "%s\n", message.toLocal8Bit().constData());
      });
  // Never destroyed: tearing Qt down from static destructors after main returns is unsafe.
  new QApplication(argc, argv);
  qInstallMessageHandler(previous);
  std::setlocale(LC_ALL, locale.c_str());
}

namespace {
// The method the others are judged against (its error is 0 by definition): the table's exact row.
bool is_reference_method(const std::string& name) {
  for (const auto& m : fitting::threshold_methods())
    if (m.name == name) return m.kind == fitting::ThresholdKind::exact;
  return false;
}
}  // namespace

std::vector<ErrorBar> threshold_error_bars(const std::vector<VectorRow>& vectors,
                                           const std::vector<ThresholdRow>& thresholds, const StoredOptions& options) {
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> size;
  for (const auto& v : vectors) size[{v.step, v.scope}] = v.n;
  std::map<std::pair<std::string, double>, std::vector<double>> errors;
  for (const auto& t : thresholds) {
    if (!t.error.empty() || is_reference_method(t.method)) continue;
    const auto n = size.find({t.step, t.scope});
    if (n != size.end() && too_small_for_quality(n->second, t.density)) continue;
    if (std::isfinite(t.rel_error)) errors[{t.method, t.density}].push_back(std::fabs(t.rel_error));
  }
  std::vector<ErrorBar> bars;
  for (const auto& m : options.methods)
    for (double r : options.densities) {
      const auto it = errors.find({m, r});
      if (it == errors.end() || it->second.empty()) continue;
      const auto& e = it->second;
      bars.push_back({m, r, e.size(), gs::quantile(e, 0.5), gs::quantile(e, 0.05), gs::quantile(e, 0.95)});
    }
  return bars;
}

namespace {

// What the charts are drawn from: the store's rows, read once.
struct StoreRows {
  std::vector<VectorRow> vectors;
  std::vector<FitRow> fits;
  std::vector<ThresholdRow> thresholds;
};

// The charts over training: goodness of fit per layer kind, the focus vector's estimation quality
// per density, the threshold error against exact top-k.
void plan_over_training(const AnalysisReader& reader, const StoreRows& rows, const Focus* focus,
                        std::vector<Planned>& plan, ReportPlots& out) {
  const auto& [vectors, fits, thresholds] = rows;
  const auto& options = reader.options();
  // Goodness of fit over training, per layer kind (the summary's order).
  const AnalysisSummary summary = summarize(reader);
  for (const auto& k : summary.kinds) {
    auto series = std::make_shared<TrainingSeries>(series_from_rows(fits, thresholds, k.kind, SeriesOf::kind));
    const std::string over =
        k.kind == kKindModel ? "of the whole model flattened" : "as the median over the " + k.kind + " layers";
    plan.push_back({{"KS statistic over training: " + k.kind, "ks-" + slug(k.kind) + ".png",
                     "Kolmogorov-Smirnov D of each SID fitted to |g| at every analysed step, " + over +
                         "; lower fits better. Best over training: " + (k.best_by_aic.empty() ? "-" : k.best_by_aic) +
                         " by AIC, " + (k.best_by_ks.empty() ? "-" : k.best_by_ks) + " by KS."},
                    LegendPlace::top,
                    [series](QCustomPlot* p) { plot_ks(p, *series); }});
  }

  // Estimation quality over training of the focus vector, per density.
  auto focus_series =
      std::make_shared<TrainingSeries>(series_from_rows(fits, thresholds, focus->scope, SeriesOf::scope));
  for (double r : options.densities)
    plan.push_back({{"Estimation quality over training at ratio " + number(r) + ": " + scope_title(focus->scope),
                     "quality-" + number(r) + ".png",
                     "Achieved / target density of each method at ratio " + number(r) + " for " +
                         scope_words(focus->scope) + " (" + std::to_string(focus->n) +
                         " values) at every analysed step; the black line at 1 is exact top-k, the band is "
                         "+-20%."},
                    LegendPlace::top,
                    [focus_series, r](QCustomPlot* p) { plot_quality(p, *focus_series, r); }});

  // Threshold error against exact top-k, over every vector large enough.
  auto bars = std::make_shared<std::vector<ErrorBar>>(threshold_error_bars(vectors, thresholds, options));
  if (!bars->empty())
    plan.push_back(
        {{"Threshold error vs exact top-k", "threshold-error.png",
          "Median |threshold - top-k threshold| / top-k threshold of each method per "
          "ratio (whiskers: 5th to 95th percentile) over the vectors with n x ratio >= " +
              number(kMinTargetCountForQuality) + ", as in the quality table; an error of 0 is written \"0 (exact)\"."},
         LegendPlace::inside,
         [bars](QCustomPlot* p) { plot_threshold_error(p, *bars); }});
  else
    out.notes.push_back("Threshold error plot skipped: no vector has n x ratio >= " +
                        number(kMinTargetCountForQuality) + " for any method but top-k.");
}

// The focus vector at its last step: the histogram of its values (from the snapshot) and the QQ
// plot of the best fit.
void plan_focus_vector(const AnalysisReader& reader, const StoreRows& rows, const Focus* focus,
                       std::vector<Planned>& plan, ReportPlots& out) {
  const auto& [vectors, fits, thresholds] = rows;
  const auto& options = reader.options();
  const auto qq = reader.qq();
  const fitting::FitReport report = report_from_rows(fits, qq, thresholds, focus->step, focus->scope);
  std::vector<double> densities = options.densities;
  std::sort(densities.begin(), densities.end());
  const double mid_ratio = densities[densities.size() / 2];
  const std::string at = scope_words(focus->scope) + " at step " + std::to_string(focus->step);
  std::string note;
  if (auto g = read_focus(reader, *focus, note)) {
    try {
      auto view = std::make_shared<VectorView>(histogram_view(*g, focus->scope, focus->step, ViewOptions{}));
      view->report = report;
      add_curves(*view, ViewOptions{}.curve_points);
      plan.push_back({{"Histogram of |g| with fitted SIDs and thresholds at density " + number(mid_ratio) + ": " +
                           scope_title(focus->scope) + ", step " + std::to_string(focus->step),
                       "histogram.png",
                       "Density of |g| for " + at + " (" + std::to_string(view->finite_nonzero) +
                           " finite non-zero values, log-log axes) with each SID's fitted density and each "
                           "method's threshold at density " +
                           number(mid_ratio) + " (top-k solid)."},
                      LegendPlace::inside,
                      [view, mid_ratio](QCustomPlot* p) { plot_histogram(p, *view, mid_ratio); }});
    } catch (const Error& e) {
      out.notes.push_back("Histogram skipped: " + std::string(e.what()) + ".");
    }
  } else {
    out.notes.push_back(note);
  }
  const fitting::DistFit* best = nullptr;
  for (const auto& f : report.fits)
    if (f.error.empty() && !f.qq.empty() && std::isfinite(f.aic) && (!best || f.aic < best->aic)) best = &f;
  if (best) {
    auto view = std::make_shared<VectorView>();
    view->report = report;
    const std::string dist = best->dist;
    plan.push_back({{"QQ plot of the best SID by AIC (" + dist + "): " + scope_title(focus->scope) + ", step " +
                         std::to_string(focus->step),
                     "qq.png",
                     "Sample quantiles of |g| for " + at + " against the quantiles of the fitted " + dist +
                         " (lowest AIC there); points on the dashed identity line mean a "
                         "perfect fit."},
                    LegendPlace::inside,
                    [view, dist](QCustomPlot* p) { plot_qq(p, *view, dist); }});
  } else {
    out.notes.push_back("QQ plot skipped: no fit with QQ points for " + at + ".");
  }
}

// Draws the plan into dir: nothing is drawn before every name is known to be free.
void draw(const std::vector<Planned>& plan, const fs::path& dir, bool replace, ReportPlots& out) {
  for (const auto& p : plan) {
    const fs::path file = dir / p.image.file;
    if (fs::exists(file) && !replace) throw Error(file.string() + ": already exists; pass --force to replace it");
  }
  for (const auto& p : plan) {
    QCustomPlot plot;
    plot.resize(kWidth, kHeight);
    setup_plot(&plot, QString::fromStdString(p.image.title), p.legend);
    p.draw(&plot);
    const fs::path file = dir / p.image.file;
    if (!plot.savePng(QString::fromStdString(file.string()), kWidth, kHeight, kScale))
      throw Error(file.string() + ": cannot write the PNG (is the folder writable?)");
    out.images.push_back(p.image);
  }
}

}  // namespace

ReportPlots render_report_plots(const AnalysisReader& reader, const fs::path& dir, bool replace) {
  ensure_application();
  ReportPlots out;
  const StoreRows rows{reader.vectors(), reader.fits(), reader.thresholds()};
  const std::optional<Focus> focus = choose_focus(rows.vectors);
  if (!focus) {
    out.notes.push_back("No plots: the analysis holds no analysed vectors yet.");
    return out;
  }
  std::vector<Planned> plan;
  plan_over_training(reader, rows, &*focus, plan, out);
  plan_focus_vector(reader, rows, &*focus, plan, out);
  draw(plan, dir, replace, out);
  return out;
}

}  // namespace gs::analyzer::plots
