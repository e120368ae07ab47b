// CSV export of the analysis tables (one file per table, a header row, RFC 4180 quoting).
#include <cmath>
#include <cstdio>
#include <fstream>

#include "gs/analyzer/summary.hpp"
#include "gs/base/error.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;

std::string cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
// Shortest text that reads back to the same double; NaN as "nan" (pandas and Python read it).
std::string cell(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
std::string cell(std::uint64_t v) { return std::to_string(v); }
std::string cell(std::int64_t v) { return std::to_string(v); }
std::string cell(std::int32_t v) { return std::to_string(v); }
std::string cell(bool v) { return v ? "1" : "0"; }

template <class... T>
void line(std::ostream& out, const T&... v) {
  bool first = true;
  ((out << (first ? "" : ",") << cell(v), first = false), ...);
  out << '\n';
}

}  // namespace

std::vector<fs::path> export_csv(const AnalysisReader& reader, const fs::path& dir, bool force) {
  const std::vector<fs::path> files = {dir / "fits.csv", dir / "thresholds.csv", dir / "tails.csv",
                                       dir / "vectors.csv"};
  if (!force)  // check all first: nothing is written when any would be replaced
    for (const auto& f : files)
      if (fs::exists(f)) throw Error(f.string() + ": already exists; pass --force to replace it");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the folder: " + ec.message());
  auto open = [](const fs::path& f) {
    std::ofstream out(f);
    if (!out) throw Error(f.string() + ": cannot write");
    return out;
  };
  {
    auto out = open(files[0]);
    out << "step,scope,kind,dist,param1,param2,loglik,aic,ks_D,ks_p,ad_A2,ks_n,ks_subsampled,error\n";
    for (const auto& r : reader.fits())
      line(out, r.step, r.scope, r.kind, r.dist, r.param1, r.param2, r.loglik, r.aic, r.ks_D, r.ks_p, r.ad_A2, r.ks_n,
           r.ks_subsampled, r.error);
  }
  {
    auto out = open(files[1]);
    out << "step,scope,kind,method,ratio,threshold,stages,selected,quality,exact_threshold,"
           "rel_error,seconds,error\n";
    for (const auto& r : reader.thresholds())
      line(out, r.step, r.scope, r.kind, r.method, r.density, r.threshold, r.stages, r.selected, r.quality,
           r.exact_threshold, r.rel_error, r.seconds, r.error);
  }
  {
    auto out = open(files[2]);
    out << "step,scope,dist,ratio,threshold,predicted,observed\n";
    for (const auto& r : reader.tails())
      line(out, r.step, r.scope, r.dist, r.density, r.threshold, r.predicted, r.observed);
  }
  {
    auto out = open(files[3]);
    out << "step,scope,kind,n,zeros,nonfinite,fit_seconds\n";
    for (const auto& r : reader.vectors()) line(out, r.step, r.scope, r.kind, r.n, r.zeros, r.nonfinite, r.fit_seconds);
  }
  return files;
}

}  // namespace gs::analyzer
