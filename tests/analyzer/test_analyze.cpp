// The analysis pipeline: its rows agree exactly with fit_report on the same vector, every vector
// and step selected is analysed, and options are validated.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "error_text.hpp"
#include "synthetic_snapshot.hpp"
#include "common/temp_dir.hpp"

namespace gs::analyzer {
namespace {

using gs::testing::TempDir;

// Same double, NaN equal to NaN.
void expect_same(double stored, double expected, const std::string& what) {
  if (std::isnan(expected))
    EXPECT_TRUE(std::isnan(stored)) << what;
  else
    EXPECT_EQ(stored, expected) << what;
}

AnalyzeConfig small_config(const TempDir& dir) {
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / "analysis.h5";
  c.backend = "cpu";
  c.densities = {0.1, 0.01};
  return c;
}

TEST(Analyze, AgreesWithFitReportOnTheSameStepAndVector) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 3);
  const AnalyzeConfig c = small_config(dir);
  const AnalyzeResult r = analyze(c);
  EXPECT_EQ(r.steps_analyzed, 3u);
  EXPECT_EQ(r.vectors_analyzed, 3u * 6u);  // 5 layers + the whole model

  const AnalysisReader reader(c.output);
  const auto fits = reader.fits();
  const auto thresholds = reader.thresholds();
  const data::SnapshotReader snap(c.input);
  for (const std::string scope : {"fc1.weight", "conv1.bias", "(model)"}) {
    const std::size_t row = 1;  // step 10
    const VectorChoice choice = choose_vector(snap, snap.steps()[row].step,
                                              scope == kModelScope ? std::nullopt : std::optional<std::string>(scope));
    const std::vector<float> v = read_vector(snap, choice);
    kernels::cpu::CpuPasses passes(v);
    const fitting::FitReport rep = fitting::fit_report(passes, c.fit_options());

    std::map<std::string, const FitRow*> stored;
    for (const auto& f : fits)
      if (f.step == 10 && f.scope == scope) stored[f.dist] = &f;
    ASSERT_EQ(stored.size(), rep.fits.size()) << scope;
    for (const auto& f : rep.fits) {
      const FitRow& s = *stored.at(f.dist);
      const std::string what = scope + " " + f.dist;
      if (!f.error.empty()) {  // stored as it was (cut to the field's width)
        EXPECT_EQ(s.error, f.error.substr(0, s.error.size())) << what;
        EXPECT_FALSE(s.error.empty()) << what;
        continue;
      }
      EXPECT_EQ(s.error, "") << what;
      EXPECT_EQ(s.kind, choice.kind) << what;
      expect_same(s.param1, f.params[0].second, what + " param1");
      expect_same(s.param2, f.params.size() > 1 ? f.params[1].second : NAN, what + " param2");
      expect_same(s.loglik, f.loglik, what + " loglik");
      expect_same(s.aic, f.aic, what + " aic");
      expect_same(s.ks_D, f.ks_D, what + " ks_D");
      expect_same(s.ks_p, f.ks_p, what + " ks_p");
      expect_same(s.ad_A2, f.ad_A2, what + " ad_A2");
      EXPECT_EQ(s.ks_n, f.ks_n) << what;
    }
    // Thresholds: same values as the report's; the exact threshold is top-k's at that density.
    std::map<std::pair<std::string, double>, const ThresholdRow*> th;
    for (const auto& t : thresholds)
      if (t.step == 10 && t.scope == scope) th[{t.method, t.density}] = &t;
    ASSERT_EQ(th.size(), rep.thresholds.size()) << scope;
    std::map<double, double> exact;
    for (const auto& e : rep.thresholds)
      if (e.result.method == "topk") exact[e.result.density] = e.result.threshold;
    for (const auto& e : rep.thresholds) {
      const ThresholdRow& s = *th.at({e.result.method, e.result.density});
      const std::string what = scope + " " + e.result.method + " " + std::to_string(e.result.density);
      EXPECT_EQ(s.error, e.error.substr(0, s.error.size())) << what;
      if (!e.error.empty()) continue;
      EXPECT_EQ(s.threshold, e.result.threshold) << what;
      EXPECT_EQ(s.selected, e.result.selected) << what;
      EXPECT_EQ(s.quality, e.result.quality) << what;
      EXPECT_EQ(s.stages, e.result.stages) << what;
      EXPECT_EQ(s.exact_threshold, exact.at(e.result.density)) << what;
      EXPECT_DOUBLE_EQ(s.rel_error, (e.result.threshold - s.exact_threshold) / s.exact_threshold) << what;
      EXPECT_GE(s.seconds, 0.0) << what;
    }
    EXPECT_EQ(th.at({"topk", 0.1})->rel_error, 0.0);
  }
}

TEST(Analyze, EveryVectorAndTableHasItsRows) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  const AnalyzeConfig c = small_config(dir);
  analyze(c);
  const AnalysisReader reader(c.output);
  const std::size_t vectors = 2 * 6, dists = 4, methods = fitting::all_methods().size(), densities = 2;
  EXPECT_EQ(reader.steps().size(), 2u);
  EXPECT_EQ(reader.vectors().size(), vectors);
  EXPECT_EQ(reader.fits().size(), vectors * dists);
  EXPECT_EQ(reader.thresholds().size(), vectors * methods * densities);
  EXPECT_EQ(reader.tails().size(), vectors * dists * densities);
  EXPECT_EQ(reader.qq().size(), vectors * dists * 19);
  // The whole model is every layer's values: n adds up, and kinds come from the shapes.
  std::uint64_t layers_n = 0, model_n = 0;
  for (const auto& v : reader.vectors()) {
    if (v.step != 0) continue;
    if (v.scope == kModelScope) {
      model_n = v.n;
      EXPECT_EQ(v.kind, kKindModel);
    } else {
      layers_n += v.n;
    }
    if (v.scope == "conv1.weight") {
      EXPECT_EQ(v.kind, kKindConv);
    }
    if (v.scope == "fc1.weight") {
      EXPECT_EQ(v.kind, kKindLinear);
    }
    if (v.scope == "fc1.bias") {
      EXPECT_EQ(v.kind, kKindBias);
    }
    if (v.scope == "norm.weight") {
      EXPECT_EQ(v.kind, kKindNormWeight);
    }
    if (v.n >= 600) {  // about 1 value in 211 is an exact zero
      EXPECT_GT(v.zeros, 0u) << v.scope;
    }
  }
  EXPECT_EQ(model_n, 600u + 8 + 3200 + 64 + 32);
  EXPECT_EQ(layers_n, model_n);
  const auto steps = reader.steps();
  EXPECT_EQ(steps[1].step, 10);
  EXPECT_EQ(steps[1].row, 1u);
  EXPECT_DOUBLE_EQ(steps[1].loss, 1.0);
  EXPECT_EQ(reader.source().model, "synthetic");
  EXPECT_EQ(reader.source().created, "2026-01-02T03:04:05Z");
  EXPECT_EQ(reader.options().densities, c.densities);
}

TEST(Analyze, GranularityAndStepSelectionPickTheVectors) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 5);
  AnalyzeConfig c = small_config(dir);
  c.vectors = VectorSet::layers;
  c.steps = StepSelection::parse("10::20");  // training steps 10, 30 (rows 1, 3)
  c.dists = {"exponential"};
  c.methods = {"topk", "sidco-e"};
  analyze(c);
  {
    const AnalysisReader reader(c.output);
    std::vector<std::int64_t> steps;
    for (const auto& s : reader.steps()) steps.push_back(s.step);
    EXPECT_EQ(steps, (std::vector<std::int64_t>{10, 30}));
    for (const auto& v : reader.vectors()) EXPECT_NE(v.scope, kModelScope);
    EXPECT_EQ(reader.vectors().size(), 2u * 5u);
    EXPECT_EQ(reader.thresholds().size(), 2u * 5u * 2u * 2u);
  }
  c.vectors = VectorSet::model;
  c.force = true;
  analyze(c);
  const AnalysisReader reader(c.output);
  ASSERT_EQ(reader.vectors().size(), 2u);
  for (const auto& v : reader.vectors()) EXPECT_EQ(v.scope, kModelScope);
}

TEST(Analyze, OneVectorByHandMatchesTheStore) {
  // analyze_vector on a Laplace vector: top-k selects exactly k, estimates land near the target.
  std::mt19937_64 rng(11);
  std::exponential_distribution<double> expo(1.0);
  std::vector<float> v(20000);
  for (auto& x : v) x = static_cast<float>(((rng() & 1) ? 1 : -1) * 0.01 * expo(rng));
  kernels::cpu::CpuPasses passes(v);
  fitting::FitReportOptions o;
  o.densities = {0.01};
  StepResults res;
  analyze_vector(passes, o, {"topk", "sidco-e"}, 5, "x", "bias", res);
  ASSERT_EQ(res.thresholds.size(), 2u);
  EXPECT_EQ(res.thresholds[0].selected, 200u);
  EXPECT_EQ(res.thresholds[0].quality, 1.0);
  EXPECT_NEAR(res.thresholds[1].quality, 1.0, 0.15);  // exponential data: SIDCo-E within 15%
  EXPECT_NEAR(res.thresholds[1].rel_error, 0.0, 0.05);
  ASSERT_EQ(res.fits.size(), 4u);
  EXPECT_NEAR(res.fits[0].param1, 0.01, 0.0005);  // exponential beta = mean |g|
  EXPECT_TRUE(std::isnan(res.fits[0].param2));
}

// Recorded steps 0, 10, ..., 10 * (count - 1).
std::vector<data::StepRecord> every_10(std::size_t count) {
  std::vector<data::StepRecord> steps;
  for (std::size_t i = 0; i < count; ++i) steps.push_back({std::int64_t(10 * i), 1.0, 0.1});
  return steps;
}

TEST(AnalyzeConfigTest, StepSelectionPicksTrainingStepsNotRows) {
  const auto steps = every_10(5);  // 0, 10, 20, 30, 40
  EXPECT_EQ(StepSelection::parse("").rows(steps), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(StepSelection::parse("20").rows(steps), (std::vector<std::size_t>{2}));
  EXPECT_EQ(StepSelection::parse("10:30").rows(steps), (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(StepSelection::parse("5:35").rows(steps), (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(StepSelection::parse("::20").rows(steps), (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(StepSelection::parse("10:1000:30").rows(steps), (std::vector<std::size_t>{1, 4}));
  EXPECT_EQ(StepSelection::parse("40,0,20").rows(steps), (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(StepSelection::parse("0:20,40").rows(steps), (std::vector<std::size_t>{0, 1, 4}));
  EXPECT_EQ(StepSelection::parse("1::3").to_string(), "1::3");
  EXPECT_EQ(StepSelection::parse("40,0:20").to_string(), "40,0:20:1");
  // Nothing selected, or a named step not recorded: the error says which steps exist.
  const std::string none = test::error_of([&] { StepSelection::parse("100:200").rows(steps); });
  EXPECT_NE(none.find("selects no recorded step; recorded steps run from 0 to 40, every 10 (5 steps)"),
            std::string::npos)
      << none;
  const std::string missing = test::error_of([&] { StepSelection::parse("0,15").rows(steps); });
  EXPECT_NE(missing.find("step 15 is not recorded; recorded steps run from 0 to 40"), std::string::npos) << missing;
  EXPECT_NE(test::error_of([&] { StepSelection::parse("0:10").rows({}); }).find("no steps are recorded"),
            std::string::npos);
  EXPECT_TRUE(StepSelection::parse("").rows({}).empty());  // every step of a file that has none yet
  EXPECT_THROW(StepSelection::parse("a:b"), Error);
  EXPECT_THROW(StepSelection::parse("-1:"), Error);
  EXPECT_THROW(StepSelection::parse("::0"), Error);
  EXPECT_THROW(StepSelection::parse("3:2"), Error);
  EXPECT_THROW(StepSelection::parse("1:2:3:4"), Error);
  EXPECT_THROW(StepSelection::parse("1,,2"), Error);
  EXPECT_EQ(parse_vector_set("layer"), VectorSet::layers);
  EXPECT_THROW(parse_vector_set("bucket"), Error);
}

TEST(AnalyzeConfigTest, JoinedSelectionsAreTheUnionInFewestPieces) {
  auto joined = [](const char* a, const char* b) {
    return StepSelection::parse(a).joined(StepSelection::parse(b)).to_string();
  };
  EXPECT_EQ(joined("0:100", "0:200"), "0:200:1");                // a wider range
  EXPECT_EQ(joined("100:200", "0:100"), "0:200:1");              // ranges that meet
  EXPECT_EQ(joined("0:100:10", "50::10"), "0::10");              // one stride and phase, overlapping
  EXPECT_EQ(joined("0:100:10", "5:50:10"), "0:100:10,5:50:10");  // another phase stays apart
  EXPECT_EQ(joined("20", "20"), "20");
  EXPECT_EQ(joined("20", "21"), "20:22:1");
  EXPECT_EQ(joined("0:10", ""), "0::1");  // every step
  const auto steps = every_10(10);
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"0:30", "50:70"}, {"0::20", "10::20"}, {"40", "0:35:5"}, {"10:40:10", "0:100:30"}}) {
    std::set<std::size_t> both;
    for (const char* t : {a, b})
      for (std::size_t r : StepSelection::parse(t).rows(steps)) both.insert(r);
    const auto union_rows = StepSelection::parse(a).joined(StepSelection::parse(b)).rows(steps);
    EXPECT_EQ(std::set<std::size_t>(union_rows.begin(), union_rows.end()), both) << a << " " << b;
  }
}

TEST(AnalyzeConfigTest, BadOptionsAreRefusedBeforeAnyFileIsMade) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 1);
  auto expect_error = [&](AnalyzeConfig c, const std::string& text) {
    try {
      analyze(c);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(c.output)) << text;
  };
  AnalyzeConfig c = small_config(dir);
  c.dists = {"cauchy"};
  expect_error(c, "unknown distribution 'cauchy'");
  c = small_config(dir);
  c.methods = {"topk", "magic"};
  expect_error(c, "unknown method 'magic'");
  c = small_config(dir);
  c.densities = {0.1, 1.5};
  expect_error(c, "1.5");
  c = small_config(dir);
  c.densities = {0.1, 0.1};
  expect_error(c, "repeated");
  c = small_config(dir);
  c.backend = "tpu";
  expect_error(c, "unknown backend 'tpu'");
  c = small_config(dir);
  c.stages = -1;
  expect_error(c, "stages");
  c = small_config(dir);
  c.jobs = -1;
  expect_error(c, "--jobs must be 0 (one per core) or more");
  c = small_config(dir);
  c.memory_mib = 0;
  expect_error(c, "--memory must be at least 1 MiB");
  c = small_config(dir);
  c.output.clear();
  EXPECT_THROW(c.validate(), Error);
}

TEST(Vectors, ChooseVectorNamesWhatExists) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  const data::SnapshotReader snap(dir / "snap.h5");
  const VectorChoice last = choose_vector(snap, std::nullopt, std::nullopt);
  EXPECT_EQ(last.step, 10);
  EXPECT_EQ(last.scope, kModelScope);
  EXPECT_EQ(read_vector(snap, last).size(), static_cast<std::size_t>(snap.total_numel()));
  const VectorChoice one = choose_vector(snap, 0, std::string("fc1.bias"));
  EXPECT_EQ(one.kind, kKindBias);
  EXPECT_EQ(read_vector(snap, one), test::synthetic_values(7, 0, 3, 64));
  EXPECT_THROW(choose_vector(snap, 5, std::nullopt), Error);
  EXPECT_THROW(choose_vector(snap, std::nullopt, std::string("nope")), Error);
}

TEST(Vectors, FitReportJsonFollowsTheContract) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> expo(2.0);
  std::vector<float> v(5000);
  for (auto& x : v) x = static_cast<float>(expo(rng));
  v[0] = 0.0f;
  kernels::cpu::CpuPasses passes(v);
  fitting::FitReportOptions o;
  o.densities = {0.01};
  const fitting::FitReport rep = fitting::fit_report(passes, o);
  const nlohmann::ordered_json j = fit_report_json(rep);
  EXPECT_EQ(j["n"], 5000);
  EXPECT_EQ(j["excluded"], 1);
  ASSERT_EQ(j["fits"].size(), 4u);
  EXPECT_EQ(j["fits"][0]["dist"], "exponential");
  EXPECT_DOUBLE_EQ(j["fits"][0]["params"]["beta"].get<double>(), rep.fits[0].params[0].second);
  EXPECT_EQ(j["fits"][1]["params"].size(), 2u);  // gamma: alpha, beta
  EXPECT_TRUE(j["fits"][1]["params"].contains("alpha"));
  EXPECT_DOUBLE_EQ(j["fits"][2]["ks_D"].get<double>(), rep.fits[2].ks_D);
  ASSERT_EQ(j["thresholds"].size(), fitting::all_methods().size());
  EXPECT_EQ(j["thresholds"][0]["method"], "topk");
  EXPECT_EQ(j["thresholds"][0]["selected"], 50);
}

}  // namespace
}  // namespace gs::analyzer

// The step plan: the model's vector joins the layers' pool while its one thread would finish no
// later than the pool's share of the step (up to two threads), and goes first alone beyond that,
// when only it is analysed, or when it is streamed; the pool starts its largest tasks first.
TEST(StepPlan, PoolsTheModelWhileItsThreadKeepsUpWithThePool) {
  const std::vector<std::uint64_t> sizes = {10, 300, 20, 300, 5};
  using gs::analyzer::plan_step;
  using gs::analyzer::StepPlan;
  for (int jobs : {1, 2}) {
    const StepPlan p = plan_step(sizes, true, true, jobs, true);
    EXPECT_FALSE(p.model_alone) << jobs;
    EXPECT_EQ(p.tasks, (std::vector<std::ptrdiff_t>{StepPlan::kModel, 1, 3, 2, 0, 4})) << jobs;
  }
  for (int jobs : {3, 4, 16}) {
    const StepPlan p = plan_step(sizes, true, true, jobs, true);
    EXPECT_TRUE(p.model_alone) << jobs;
    EXPECT_EQ(p.tasks, (std::vector<std::ptrdiff_t>{1, 3, 2, 0, 4})) << jobs;
  }
  const StepPlan streamed = plan_step(sizes, true, true, 2, false);
  EXPECT_TRUE(streamed.model_alone);
  EXPECT_EQ(streamed.tasks.size(), sizes.size());
  const StepPlan model_only = plan_step(sizes, true, false, 2, true);
  EXPECT_TRUE(model_only.model_alone);
  EXPECT_TRUE(model_only.tasks.empty());
  const StepPlan layers_only = plan_step(sizes, false, true, 2, true);
  EXPECT_FALSE(layers_only.model_alone);
  EXPECT_EQ(layers_only.tasks, (std::vector<std::ptrdiff_t>{1, 3, 2, 0, 4}));
}
