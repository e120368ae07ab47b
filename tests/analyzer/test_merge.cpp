// Shards of one analysis (`--steps` slices, run anywhere) merged equal the store of one run over
// all their steps; shards of another snapshot, with other options or that do not tile one
// selection are refused.
#include <gtest/gtest.h>

#include "gs/analyzer/analyze.hpp"
#include "gs/base/error.hpp"
#include "common/temp_dir.hpp"
#include "error_text.hpp"
#include "same_store.hpp"
#include "synthetic_snapshot.hpp"

namespace gs::analyzer {
namespace {

using gs::testing::TempDir;

AnalyzeConfig shard_config(const TempDir& dir, const std::string& out, const std::string& steps) {
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / out;
  c.backend = "cpu";
  c.densities = {0.1, 0.01};
  c.steps = StepSelection::parse(steps);
  return c;
}

using test::error_of;

TEST(Merge, ShardsMergedEqualOneRun) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 7);
  analyze(shard_config(dir, "single.h5", "10::20"));  // steps 10, 30, 50
  // Given out of order, each on its own thread count.
  AnalyzeConfig late = shard_config(dir, "b.h5", "50::20");
  late.jobs = 1;
  analyze(late);
  analyze(shard_config(dir, "a.h5", "10:50:20"));
  const MergeResult r = merge_stores({dir / "b.h5", dir / "a.h5"}, dir / "merged.h5", false);
  EXPECT_EQ(r.shards, 2u);
  EXPECT_EQ(r.steps, 3u);  // steps 10, 30, 50
  EXPECT_EQ(r.selection, "10::20");
  test::expect_same_store(AnalysisReader(dir / "merged.h5"), AnalysisReader(dir / "single.h5"));

  // Nothing is replaced without force; with it, the same store again.
  EXPECT_NE(error_of([&] {
              merge_stores({dir / "a.h5", dir / "b.h5"}, dir / "merged.h5", false);
            }).find("already exists"),
            std::string::npos);
  merge_stores({dir / "a.h5", dir / "b.h5"}, dir / "merged.h5", true);
  test::expect_same_store(AnalysisReader(dir / "merged.h5"), AnalysisReader(dir / "single.h5"));
}

TEST(Merge, RefusesShardsOfAnotherRunOrThatDoNotTile) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 6);
  analyze(shard_config(dir, "a.h5", "0:20"));
  analyze(shard_config(dir, "b.h5", "20:40"));
  analyze(shard_config(dir, "gap.h5", "30:60"));
  AnalyzeConfig other = shard_config(dir, "other.h5", "20:40");
  other.densities = {0.1};
  analyze(other);
  AnalyzeConfig stride = shard_config(dir, "stride.h5", "20:60:20");
  analyze(stride);
  test::write_synthetic_snapshot(dir / "snap2.h5", 6, 7, 10, "2027-01-01T00:00:00Z");
  AnalyzeConfig foreign = shard_config(dir, "foreign.h5", "20:40");
  foreign.input = dir / "snap2.h5";
  analyze(foreign);

  const auto merged = dir / "m.h5";
  EXPECT_NE(error_of([&] {
              merge_stores({dir / "a.h5", dir / "gap.h5"}, merged, false);
            }).find("must end where the second begins"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              merge_stores({dir / "a.h5", dir / "other.h5"}, merged, false);
            }).find("other options"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              merge_stores({dir / "a.h5", dir / "stride.h5"}, merged, false);
            }).find("strides differ"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              merge_stores({dir / "a.h5", dir / "foreign.h5"}, merged, false);
            }).find("another snapshot"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_stores({}, merged, false); }).find("no analysis file"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(merged));  // nothing half-made
  merge_stores({dir / "b.h5", dir / "a.h5"}, merged, false);
  EXPECT_EQ(AnalysisReader(merged).options().steps, "0:40:1");
}

}  // namespace
}  // namespace gs::analyzer
