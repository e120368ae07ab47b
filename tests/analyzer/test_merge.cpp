// Shards of one analysis (`--steps` slices, run anywhere) merged equal the store of one run over
// all their steps; shards of another snapshot, with other options or that do not tile one
// selection are refused.
#include <gtest/gtest.h>

#include "gs/analyzer/analyze.hpp"
#include "gs/error.hpp"
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
  analyze(shard_config(dir, "single.h5", "1::2"));
  // Given out of order, each on its own thread count.
  AnalyzeConfig late = shard_config(dir, "b.h5", "5::2");
  late.jobs = 1;
  analyze(late);
  analyze(shard_config(dir, "a.h5", "1:5:2"));
  const MergeResult r = merge_stores({dir / "b.h5", dir / "a.h5"}, dir / "merged.h5", false);
  EXPECT_EQ(r.shards, 2u);
  EXPECT_EQ(r.steps, 3u);  // rows 1, 3, 5
  EXPECT_EQ(r.selection, "1::2");
  test::expect_same_store(AnalysisReader(dir / "merged.h5"), AnalysisReader(dir / "single.h5"));

  // Nothing is replaced without force; with it, the same store again.
  EXPECT_NE(error_of([&] { merge_stores({dir / "a.h5", dir / "b.h5"}, dir / "merged.h5", false); })
                .find("already exists"),
            std::string::npos);
  merge_stores({dir / "a.h5", dir / "b.h5"}, dir / "merged.h5", true);
  test::expect_same_store(AnalysisReader(dir / "merged.h5"), AnalysisReader(dir / "single.h5"));
}

TEST(Merge, RefusesShardsOfAnotherRunOrThatDoNotTile) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 6);
  analyze(shard_config(dir, "a.h5", "0:2"));
  analyze(shard_config(dir, "b.h5", "2:4"));
  analyze(shard_config(dir, "gap.h5", "3:6"));
  AnalyzeConfig other = shard_config(dir, "other.h5", "2:4");
  other.densities = {0.1};
  analyze(other);
  AnalyzeConfig stride = shard_config(dir, "stride.h5", "2:6:2");
  analyze(stride);
  test::write_synthetic_snapshot(dir / "snap2.h5", 6, 7, 10, "2027-01-01T00:00:00Z");
  AnalyzeConfig foreign = shard_config(dir, "foreign.h5", "2:4");
  foreign.input = dir / "snap2.h5";
  analyze(foreign);

  const auto merged = dir / "m.h5";
  EXPECT_NE(error_of([&] { merge_stores({dir / "a.h5", dir / "gap.h5"}, merged, false); })
                .find("must end where the second begins"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_stores({dir / "a.h5", dir / "other.h5"}, merged, false); })
                .find("other options"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_stores({dir / "a.h5", dir / "stride.h5"}, merged, false); })
                .find("strides differ"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_stores({dir / "a.h5", dir / "foreign.h5"}, merged, false); })
                .find("another snapshot"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_stores({}, merged, false); }).find("no analysis file"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(merged));  // nothing half-made
  merge_stores({dir / "b.h5", dir / "a.h5"}, merged, false);
  EXPECT_EQ(AnalysisReader(merged).options().steps, "0:4:1");
}

}  // namespace
}  // namespace gs::analyzer
