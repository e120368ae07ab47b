// `gradscope analyze` end to end: JSON on stdout parses, CSV and report are written, re-runs
// append, and nothing is replaced without --force.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gs/analyzer/store.hpp"
#include "gs/analyzer/summary.hpp"
#include "analyzer/same_store.hpp"
#include "analyzer/synthetic_snapshot.hpp"
#include "cli/gradscope_run.hpp"
#include "common/temp_dir.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
using gs::testing::CliRun;
using gs::testing::run_gradscope;
using gs::testing::TempDir;

CliRun run(const std::string& args, const TempDir& dir) { return run_gradscope("analyze " + args, dir); }

// Shards run as separate processes (one of them on one thread) and merged: the store one run writes.
TEST(AnalyzeCli, ShardsMergeIntoTheStoreOfOneRun) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 5);
  const std::string base = (dir / "snap.h5").string() + " --ratios 0.1,0.01 --backend cpu --quiet --out ";
  for (const std::string shard :
       {"single.h5 --steps 0:", "p0.h5 --steps 0:20", "p1.h5 --steps 20:40 --jobs 1", "p2.h5 --steps 40:"}) {
    const CliRun r = run(base + (dir / shard).string(), dir);
    ASSERT_EQ(r.status, 0) << shard << ": " << r.err;
  }
  const std::string merge = "merge --json --out " + (dir / "merged.h5").string() + " " + (dir / "p2.h5").string() +
                            " " + (dir / "p0.h5").string() + " " + (dir / "p1.h5").string();
  CliRun r = run_gradscope(merge, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 5);
  EXPECT_EQ(j["selection"], "0::1");
  test::expect_same_store(AnalysisReader(dir / "merged.h5"), AnalysisReader(dir / "single.h5"));
  // Again without --force: refused in one line, the merged file kept.
  r = run_gradscope(merge, dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(AnalyzeCli, JsonCsvReportAndAppend) {
  TempDir dir;
  const std::string created = "2026-02-02T02:02:02Z";
  test::write_synthetic_snapshot(dir / "snap.h5", 2, 7, 10, created);
  const std::string base =
      (dir / "snap.h5").string() + " --out " + (dir / "a.h5").string() + " --ratios 0.1,0.01 --backend cpu";
  const std::string exports = " --csv " + (dir / "csv").string() + " --report " + (dir / "rep").string();
  CliRun r = run(base + exports + " --json --quiet", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps_analyzed"], 2);
  EXPECT_EQ(j["vectors_analyzed"], 12);
  EXPECT_TRUE(j["created"].get<bool>());
  ASSERT_EQ(j["summary"]["quality"].size(), gs::fitting::all_methods().size() * 2u);
  EXPECT_EQ(j["summary"]["quality"][0]["method"], "topk");
  // Exact top-k keeps k = floor(n*density): quality k/(n*density) is 1 up to that rounding.
  EXPECT_NEAR(j["summary"]["quality"][0]["median"].get<double>(), 1.0, 0.01);
  EXPECT_EQ(j["summary"]["kinds"].back()["kind"], "whole model");
  EXPECT_TRUE(fs::exists(dir / "csv" / "fits.csv"));
  std::ifstream md(dir / "rep" / "report.md");
  std::string first;
  std::getline(md, first);
  EXPECT_EQ(first, "# Gradient analysis: synthetic");
  const std::string report((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
#ifdef GS_HAVE_PLOTS
  // The Qt build draws the plots beside report.md (tests/analyzer/test_report_plots.cpp checks them).
  for (const char* png : {"ks-whole-model.png", "quality-0.01.png", "histogram.png", "qq.png"}) {
    EXPECT_GT(fs::file_size(dir / "rep" / png), 1000u) << png;
    EXPECT_NE(report.find(std::string("](") + png + ")"), std::string::npos) << png;
  }
  EXPECT_EQ(r.err.find("no plots"), std::string::npos) << r.err;
#else
  EXPECT_NE(report.find(kNoPlotsNote), std::string::npos) << report;
  EXPECT_NE(r.err.find("the report has no plots"), std::string::npos) << r.err;
#endif

  // The CSV exists: refused without --force, with one clear line and exit 1.
  r = run(base + exports + " --quiet", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already exists; pass --force"), std::string::npos) << r.err;

  // A grown snapshot: only the new step, text summary on stdout.
  test::write_synthetic_snapshot(dir / "snap.h5", 3, 7, 10, created);
  r = run(base, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 steps were already in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Best-fitting SID per layer kind"), std::string::npos) << r.out;
  EXPECT_EQ(AnalysisReader(dir / "a.h5").steps().size(), 3u);

  // Other options: refused, suggesting --force; with --force recomputed.
  r = run(base + " --dists exponential --quiet", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  r = run(base + " --dists exponential --force --json --quiet", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["steps_analyzed"], 3);

  r = run(base + " --granularity bucket", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown granularity 'bucket'"), std::string::npos) << r.err;
  r = run((dir / "missing.h5").string() + " --out " + (dir / "b.h5").string(), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gs::analyzer
