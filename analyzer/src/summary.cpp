// Summary of an analysis file: best SID per layer kind, estimation quality, overhead.
#include "gs/analyzer/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <tuple>

#include "gs/analyzer/vectors.hpp"
#include "gs/base/quantile.hpp"

namespace gs::analyzer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string ms(double seconds) { return fmt("%.3f", seconds * 1e3); }

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

namespace {

// The best distribution per layer kind, by AIC and by KS D, over the fitted vectors (each vector's
// fits counted once); returns the number of vectors.
std::size_t rank_distributions(const AnalysisReader& reader, std::vector<KindStanding>& out) {
  // Fits grouped by vector (step, scope), each with its kind.
  std::map<std::pair<std::int64_t, std::string>, std::vector<const FitRow*>> by_vector;
  const auto fits = reader.fits();
  for (const auto& f : fits) by_vector[{f.step, f.scope}].push_back(&f);

  std::vector<std::string> kinds;
  std::map<std::string, KindStanding> standing;
  std::map<std::pair<std::string, std::string>, std::vector<double>> ks_values;
  for (const auto& [key, rows] : by_vector) {
    const std::string& kind = rows.front()->kind;
    if (!standing.count(kind)) {
      kinds.push_back(kind);
      KindStanding k;
      k.kind = kind;
      for (const auto& d : reader.options().dists) k.dists.push_back({d, 0, 0, kNaN, 0});
      standing[kind] = k;
    }
    KindStanding& k = standing[kind];
    ++k.vectors;
    const FitRow* best_aic = nullptr;
    const FitRow* best_ks = nullptr;
    for (const FitRow* f : rows) {
      if (!f->error.empty()) continue;
      for (auto& d : k.dists)
        if (d.dist == f->dist) ++d.fits;
      ks_values[{kind, f->dist}].push_back(f->ks_D);
      if (std::isfinite(f->aic) && (!best_aic || f->aic < best_aic->aic)) best_aic = f;
      if (std::isfinite(f->ks_D) && (!best_ks || f->ks_D < best_ks->ks_D)) best_ks = f;
    }
    for (auto& d : k.dists) {
      if (best_aic && d.dist == best_aic->dist) ++d.aic_wins;
      if (best_ks && d.dist == best_ks->dist) ++d.ks_wins;
    }
  }
  // Kinds in the order the report lists them; unknown kinds follow in order of appearance.
  const auto& order = layer_kind_order();
  std::stable_sort(kinds.begin(), kinds.end(), [&order](const std::string& a, const std::string& b) {
    return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
  });
  for (const auto& kind : kinds) {
    KindStanding k = standing[kind];
    std::uint64_t most_aic = 0, most_ks = 0;
    for (auto& d : k.dists) {
      d.median_ks_D = quantile(ks_values[{kind, d.dist}], 0.5);
      if (d.aic_wins > most_aic) most_aic = d.aic_wins, k.best_by_aic = d.dist;
      if (d.ks_wins > most_ks) most_ks = d.ks_wins, k.best_by_ks = d.dist;
    }
    out.push_back(std::move(k));
  }
  return by_vector.size();
}

// Estimation quality per (method, density) and each method's median time.
void rate_methods(const AnalysisReader& reader, AnalysisSummary& s) {
  std::map<std::pair<std::string, double>, std::vector<const ThresholdRow*>> by_method_ratio;
  std::map<std::string, std::vector<double>> all_seconds, model_seconds;
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> vector_size;
  for (const auto& v : reader.vectors()) vector_size[{v.step, v.scope}] = v.n;
  const auto thresholds = reader.thresholds();
  for (const auto& t : thresholds) {
    by_method_ratio[{t.method, t.density}].push_back(&t);
    all_seconds[t.method].push_back(t.seconds);
    if (t.scope == kModelScope) model_seconds[t.method].push_back(t.seconds);
  }
  for (const auto& m : reader.options().methods) {
    for (double r : reader.options().densities) {
      MethodQuality q;
      q.method = m;
      q.density = r;
      std::vector<double> quality, rel, secs;
      for (const ThresholdRow* t : by_method_ratio[{m, r}]) {
        secs.push_back(t->seconds);
        if (!t->error.empty()) continue;
        const auto n = vector_size.find({t->step, t->scope});
        if (n != vector_size.end() && too_small_for_quality(n->second, r)) {
          ++q.too_small;
          continue;
        }
        ++q.count;
        quality.push_back(t->quality);
        rel.push_back(std::fabs(t->rel_error));
      }
      q.median = quantile(quality, 0.5);
      q.p5 = quantile(quality, 0.05);
      q.p95 = quantile(quality, 0.95);
      q.median_abs_rel_error = quantile(rel, 0.5);
      q.median_seconds = quantile(secs, 0.5);
      s.quality.push_back(q);
    }
    s.overhead.push_back({m, quantile(all_seconds[m], 0.5), quantile(model_seconds[m], 0.5)});
  }
}

}  // namespace

AnalysisSummary summarize(const AnalysisReader& reader) {
  AnalysisSummary s;
  s.source = reader.source().path;
  const auto steps = reader.steps();
  s.steps = steps.size();
  if (!steps.empty()) {
    s.first_step = steps.front().step;
    s.last_step = steps.back().step;
  }
  s.vectors = rank_distributions(reader, s.kinds);
  rate_methods(reader, s);
  return s;
}

void print_summary(std::ostream& out, const AnalysisSummary& s) {
  char line[256];
  out << "Analysis of " << s.source << ": " << s.steps << " steps (" << s.first_step << ".." << s.last_step << "), "
      << s.vectors << " vectors\n\n";
  out << "Best-fitting SID per layer kind (wins over the kind's vectors; lower AIC, lower KS D)\n";
  std::snprintf(line, sizeof line, "  %-14s %-12s %8s %8s %12s\n", "kind", "dist", "AIC wins", "KS wins",
                "median KS D");
  out << line;
  for (const auto& k : s.kinds) {
    for (const auto& d : k.dists) {
      std::snprintf(line, sizeof line, "  %-14s %-12s %8llu %8llu %12s\n", k.kind.c_str(), d.dist.c_str(),
                    static_cast<unsigned long long>(d.aic_wins), static_cast<unsigned long long>(d.ks_wins),
                    fmt("%.4f", d.median_ks_D).c_str());
      out << line;
    }
    out << "  " << k.kind << ": best by AIC " << (k.best_by_aic.empty() ? "-" : k.best_by_aic) << ", by KS "
        << (k.best_by_ks.empty() ? "-" : k.best_by_ks) << " (" << k.vectors << " vectors)\n";
  }
  out << "\nEstimation quality (achieved/target density; 1 is exact) and threshold error vs top-k,\n"
         "over the vectors with n*ratio >= "
      << kMinTargetCountForQuality << "\n";
  std::snprintf(line, sizeof line, "  %-13s %8s %8s %8s %8s %8s %11s %10s\n", "method", "ratio", "vectors", "median",
                "p5", "p95", "|rel err|", "median ms");
  out << line;
  for (const auto& q : s.quality) {
    std::snprintf(line, sizeof line, "  %-13s %8g %8llu %8s %8s %8s %11s %10s\n", q.method.c_str(), q.density,
                  static_cast<unsigned long long>(q.count), fmt("%.3f", q.median).c_str(), fmt("%.3f", q.p5).c_str(),
                  fmt("%.3f", q.p95).c_str(), fmt("%.4f", q.median_abs_rel_error).c_str(),
                  ms(q.median_seconds).c_str());
    out << line;
  }
  out << "\nOverhead per method (median time per vector and ratio)\n";
  std::snprintf(line, sizeof line, "  %-13s %12s %16s\n", "method", "all ms", "whole model ms");
  out << line;
  for (const auto& o : s.overhead) {
    std::snprintf(line, sizeof line, "  %-13s %12s %16s\n", o.method.c_str(), ms(o.median_seconds).c_str(),
                  ms(o.median_model_seconds).c_str());
    out << line;
  }
}

nlohmann::json summary_json(const AnalysisSummary& s) {
  using nlohmann::json;
  json kinds = json::array();
  for (const auto& k : s.kinds) {
    json dists = json::array();
    for (const auto& d : k.dists)
      dists.push_back({{"dist", d.dist},
                       {"aic_wins", d.aic_wins},
                       {"ks_wins", d.ks_wins},
                       {"median_ks_D", number(d.median_ks_D)},
                       {"fits", d.fits}});
    kinds.push_back({{"kind", k.kind},
                     {"vectors", k.vectors},
                     {"best_by_aic", k.best_by_aic},
                     {"best_by_ks", k.best_by_ks},
                     {"dists", dists}});
  }
  json quality = json::array();
  for (const auto& q : s.quality)
    quality.push_back({{"method", q.method},
                       {"ratio", q.density},
                       {"count", q.count},
                       {"too_small", q.too_small},
                       {"median", number(q.median)},
                       {"p5", number(q.p5)},
                       {"p95", number(q.p95)},
                       {"median_abs_rel_error", number(q.median_abs_rel_error)},
                       {"median_seconds", number(q.median_seconds)}});
  json overhead = json::array();
  for (const auto& o : s.overhead)
    overhead.push_back({{"method", o.method},
                        {"median_seconds", number(o.median_seconds)},
                        {"median_model_seconds", number(o.median_model_seconds)}});
  return {{"source", s.source},       {"steps", s.steps}, {"vectors", s.vectors}, {"first_step", s.first_step},
          {"last_step", s.last_step}, {"kinds", kinds},   {"quality", quality},   {"overhead", overhead}};
}

std::string markdown_report(const AnalysisReader& reader, const AnalysisSummary& s, const ReportPlots& plots) {
  std::ostringstream md;
  const auto& src = reader.source();
  md << "# Gradient analysis: " << (src.model.empty() ? "snapshot" : src.model) << "\n\n";
  md << "- Snapshot: `" << src.path << "` (created " << src.created << ", layers " << src.layers_hash << ")\n";
  md << "- Analysis: `" << reader.path().string() << "` (created " << reader.created() << ")\n";
  md << "- Steps: " << s.steps << " (" << s.first_step << " to " << s.last_step << "), vectors: " << s.vectors << "\n";
  md << "- Options: " << reader.options().describe() << "\n\n";
  md << "## Best-fitting SID per layer kind\n\n";
  md << "Wins count the vectors (step, layer or whole model) where a SID had the lowest AIC or the "
        "lowest KS D.\n\n";
  md << "| kind | dist | AIC wins | KS wins | median KS D |\n|---|---|---:|---:|---:|\n";
  for (const auto& k : s.kinds)
    for (const auto& d : k.dists)
      md << "| " << k.kind << " | " << d.dist << " | " << d.aic_wins << " | " << d.ks_wins << " | "
         << fmt("%.4f", d.median_ks_D) << " |\n";
  md << "\n| kind | vectors | best by AIC | best by KS |\n|---|---:|---|---|\n";
  for (const auto& k : s.kinds)
    md << "| " << k.kind << " | " << k.vectors << " | " << (k.best_by_aic.empty() ? "-" : k.best_by_aic) << " | "
       << (k.best_by_ks.empty() ? "-" : k.best_by_ks) << " |\n";
  md << "\n## Estimation quality\n\nQuality = achieved density / target density (exact top-k gives 1); "
        "|rel err| = |threshold - top-k threshold| / top-k threshold.\n\n";
  md << "| method | ratio | median | p5 | p95 | median \\|rel err\\| | median ms |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& q : s.quality)
    md << "| " << q.method << " | " << q.density << " | " << fmt("%.3f", q.median) << " | " << fmt("%.3f", q.p5)
       << " | " << fmt("%.3f", q.p95) << " | " << fmt("%.4f", q.median_abs_rel_error) << " | " << ms(q.median_seconds)
       << " |\n";
  md << "\n## Overhead per method\n\n| method | median ms (all vectors) | median ms (whole model) |\n"
        "|---|---:|---:|\n";
  for (const auto& o : s.overhead)
    md << "| " << o.method << " | " << ms(o.median_seconds) << " | " << ms(o.median_model_seconds) << " |\n";
  if (!plots.images.empty() || !plots.notes.empty()) {
    md << "\n## Plots\n\n";
    for (const auto& im : plots.images) {
      md << "![" << im.title << "](" << im.file << ")\n\n";
      if (!im.caption.empty()) md << "*" << im.caption << "*\n\n";
    }
    for (const auto& note : plots.notes) md << "- " << note << "\n";
  }
  return md.str();
}

}  // namespace gs::analyzer
