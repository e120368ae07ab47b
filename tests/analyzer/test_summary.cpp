// The summary counts wins and takes quantiles as stated, from hand-made rows; the Markdown report
// and CSV files carry the tables.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/error.hpp"
#include "synthetic_snapshot.hpp"
#include "common/temp_dir.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
using gs::testing::TempDir;

FitRow fit(std::int64_t step, const std::string& scope, const std::string& kind, const std::string& dist, double aic,
           double ks) {
  FitRow f;
  f.step = step;
  f.scope = scope;
  f.kind = kind;
  f.dist = dist;
  f.param1 = 1.0;
  f.param2 = NAN;
  f.aic = aic;
  f.ks_D = ks;
  return f;
}

ThresholdRow th(std::int64_t step, const std::string& scope, const std::string& method, double density, double quality,
                double rel, double seconds) {
  ThresholdRow t;
  t.step = step;
  t.scope = scope;
  t.kind = scope == kModelScope ? kKindModel : kKindConv;
  t.method = method;
  t.density = density;
  t.quality = quality;
  t.rel_error = rel;
  t.seconds = seconds;
  return t;
}

// Two steps, a conv layer and the whole model; AIC and KS winners chosen by hand.
fs::path write_handmade(const TempDir& dir) {
  StoredOptions o;
  o.densities = {0.01};
  o.dists = {"exponential", "gamma"};
  o.methods = {"sidco-e"};
  o.granularity = "both";
  o.steps = "0::1";
  const fs::path path = dir / "hand.h5";
  AnalysisWriter w = AnalysisWriter::create(path, {"/x/snap.h5", "t0", "00ff", "m"}, o, 12, false);
  const double q[4] = {0.9, 1.1, 1.0, 1.3};
  const double rel[4] = {-0.1, 0.2, 0.0, -0.4};
  for (std::int64_t step : {0, 1}) {
    StepResults r;
    r.step = {step, static_cast<std::uint64_t>(step), 1.0, 0.1, 0.5};
    // conv: gamma wins AIC both steps; KS won by exponential at step 0 only.
    r.fits.push_back(fit(step, "c.weight", kKindConv, "exponential", 100.0, step == 0 ? 0.01 : 0.05));
    r.fits.push_back(fit(step, "c.weight", kKindConv, "gamma", 90.0, 0.03));
    // model: exponential fit failed at step 1; gamma wins everything then.
    FitRow e = fit(step, kModelScope, kKindModel, "exponential", 50.0, 0.02);
    if (step == 1) e.error = "too few values";
    r.fits.push_back(e);
    r.fits.push_back(fit(step, kModelScope, kKindModel, "gamma", 60.0, 0.04));
    const auto i = static_cast<std::size_t>(step) * 2;
    r.thresholds.push_back(th(step, "c.weight", "sidco-e", 0.01, q[i], rel[i], 0.001 * double(i + 1)));
    r.thresholds.push_back(th(step, kModelScope, "sidco-e", 0.01, q[i + 1], rel[i + 1], 0.01 * double(i + 1)));
    w.append(r);
  }
  w.close();
  return path;
}

// A 10-value bias at density 0.01 keeps k = 1 value: "quality" 10 says nothing about the method,
// so the summary leaves such vectors out of the quantiles and counts them.
TEST(Summary, LeavesVectorsTooSmallForTheRatioOutOfQuality) {
  TempDir dir;
  StoredOptions o;
  o.densities = {0.01};
  o.dists = {"exponential"};
  o.methods = {"topk"};
  o.granularity = "layer";
  o.steps = "0::1";
  const fs::path path = dir / "small.h5";
  AnalysisWriter w = AnalysisWriter::create(path, {"/x/snap.h5", "t0", "00ff", "m"}, o, 12, false);
  StepResults r;
  r.step = {0, 0, 1.0, 0.1, 0.5};
  VectorRow big, tiny;
  big.step = tiny.step = 0;
  big.scope = "c.weight";
  tiny.scope = "c.bias";
  big.kind = tiny.kind = kKindConv;
  big.n = 20000;  // n * density = 200: kept
  tiny.n = 10;    // n * density = 0.1: left out
  r.vectors = {big, tiny};
  r.thresholds.push_back(th(0, "c.weight", "topk", 0.01, 1.0, 0.0, 0.001));
  r.thresholds.push_back(th(0, "c.bias", "topk", 0.01, 10.0, 0.0, 0.001));
  w.append(r);
  w.close();
  const AnalysisSummary s = summarize(AnalysisReader(path));
  ASSERT_EQ(s.quality.size(), 1u);
  EXPECT_EQ(s.quality[0].count, 1u);
  EXPECT_EQ(s.quality[0].too_small, 1u);
  EXPECT_DOUBLE_EQ(s.quality[0].median, 1.0);
  EXPECT_DOUBLE_EQ(s.quality[0].p95, 1.0);
}

TEST(Summary, CountsWinsAndQuantilesByHand) {
  TempDir dir;
  const AnalysisReader reader(write_handmade(dir));
  const AnalysisSummary s = summarize(reader);
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.vectors, 4u);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.kinds[0].kind, kKindConv);  // report order: layer kinds, whole model last
  EXPECT_EQ(s.kinds[1].kind, kKindModel);
  const auto& conv = s.kinds[0];
  EXPECT_EQ(conv.vectors, 2u);
  EXPECT_EQ(conv.dists[0].aic_wins, 0u);
  EXPECT_EQ(conv.dists[1].aic_wins, 2u);
  EXPECT_EQ(conv.dists[0].ks_wins, 1u);
  EXPECT_EQ(conv.dists[1].ks_wins, 1u);
  EXPECT_DOUBLE_EQ(conv.dists[0].median_ks_D, 0.03);  // median of 0.01, 0.05
  EXPECT_EQ(conv.best_by_aic, "gamma");
  const auto& model = s.kinds[1];
  EXPECT_EQ(model.dists[0].aic_wins, 1u);  // step 0
  EXPECT_EQ(model.dists[1].aic_wins, 1u);  // step 1: the only successful fit
  EXPECT_EQ(model.dists[0].fits, 1u);
  EXPECT_DOUBLE_EQ(model.dists[0].median_ks_D, 0.02);

  ASSERT_EQ(s.quality.size(), 1u);
  const auto& q = s.quality[0];
  EXPECT_EQ(q.count, 4u);
  // numpy.quantile([0.9, 1.1, 1.0, 1.3], [0.5, 0.05, 0.95]) = 1.05, 0.915, 1.27
  EXPECT_NEAR(q.median, 1.05, 1e-12);
  EXPECT_NEAR(q.p5, 0.915, 1e-12);
  EXPECT_NEAR(q.p95, 1.27, 1e-12);
  EXPECT_NEAR(q.median_abs_rel_error, 0.15, 1e-12);  // of 0.1, 0.2, 0, 0.4
  ASSERT_EQ(s.overhead.size(), 1u);
  EXPECT_NEAR(s.overhead[0].median_seconds, 0.0065, 1e-12);      // of 0.001 0.01 0.003 0.03
  EXPECT_NEAR(s.overhead[0].median_model_seconds, 0.02, 1e-12);  // of 0.01, 0.03

  const nlohmann::json j = summary_json(s);
  EXPECT_EQ(j["kinds"][0]["best_by_aic"], "gamma");
  EXPECT_EQ(j["quality"][0]["count"], 4);

  std::ostringstream text;
  print_summary(text, s);
  EXPECT_NE(text.str().find("best by AIC gamma"), std::string::npos) << text.str();
  const std::string md =
      markdown_report(reader, s, {{{"KS D over training", "ks.png", "KS D per SID."}}, {"QQ plot skipped."}});
  EXPECT_NE(md.find("| conv weight | gamma | 2 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("![KS D over training](ks.png)\n\n*KS D per SID.*\n\n- QQ plot skipped.\n"), std::string::npos)
      << md;
}

// Minimal RFC 4180 reader for the checks below.
std::vector<std::vector<std::string>> read_csv(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells{""};
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char ch = line[i];
      if (quoted) {
        if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"')
          cells.back() += '"', ++i;
        else if (ch == '"')
          quoted = false;
        else
          cells.back() += ch;
      } else if (ch == '"') {
        quoted = true;
      } else if (ch == ',') {
        cells.emplace_back();
      } else {
        cells.back() += ch;
      }
    }
    rows.push_back(cells);
  }
  return rows;
}

TEST(Summary, CsvHoldsEveryRowAndRoundTripsNumbers) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / "a.h5";
  c.backend = "cpu";
  c.densities = {0.05};
  analyze(c);
  const AnalysisReader reader(c.output);
  const auto files = export_csv(reader, dir / "csv", false);
  ASSERT_EQ(files.size(), 4u);
  const auto fits = read_csv(dir / "csv" / "fits.csv");
  const auto stored = reader.fits();
  ASSERT_EQ(fits.size(), stored.size() + 1);
  EXPECT_EQ(fits[0][0], "step");
  for (std::size_t i = 0; i < stored.size(); ++i) {
    ASSERT_EQ(fits[i + 1].size(), fits[0].size()) << i;
    EXPECT_EQ(std::stoll(fits[i + 1][0]), stored[i].step);
    EXPECT_EQ(fits[i + 1][1], stored[i].scope);
    EXPECT_EQ(fits[i + 1][3], stored[i].dist);
    if (std::isnan(stored[i].param1))
      EXPECT_EQ(fits[i + 1][4], "nan");
    else
      EXPECT_EQ(std::strtod(fits[i + 1][4].c_str(), nullptr), stored[i].param1);  // exact
    EXPECT_EQ(std::strtod(fits[i + 1][8].c_str(), nullptr), stored[i].ks_D);
  }
  const auto th = read_csv(dir / "csv" / "thresholds.csv");
  const auto th_stored = reader.thresholds();
  ASSERT_EQ(th.size(), th_stored.size() + 1);
  EXPECT_EQ(th[0][9], "exact_threshold");
  EXPECT_EQ(std::strtod(th[5][5].c_str(), nullptr), th_stored[4].threshold);
  EXPECT_EQ(read_csv(dir / "csv" / "tails.csv").size(), reader.tails().size() + 1);
  EXPECT_EQ(read_csv(dir / "csv" / "vectors.csv").size(), reader.vectors().size() + 1);
}

}  // namespace
}  // namespace gs::analyzer
