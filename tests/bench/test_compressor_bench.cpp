// gradscope bench compressors: the rows say what each compressor sent and how far its decoded mean
// is from the true mean (timings are not asserted).
#include <gtest/gtest.h>

#include "gs/bench/compressor_bench.hpp"
#include "gs/base/error.hpp"

using namespace gs::bench;

TEST(CompressorBench, RowsDescribeEachCompressor) {
  CompressorBenchConfig c;
  c.n = 5000;
  c.densities = {0.01};
  c.names = {"topk", "none", "qsgd-mn", "variance"};
  c.workers = 3;
  c.repeats = 1;
  int seen = 0;
  const auto rows = run_compressor_bench(c, [&](const CompressorBenchRow&) { ++seen; });
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(seen, 4);
  const auto& topk = rows[0];
  EXPECT_EQ(topk.name, "topk");
  EXPECT_DOUBLE_EQ(topk.density, 50.0 / 5000.0);
  // 50 float values and 50 ascending indices about 100 apart: Rice-coded gaps of 8 to 9 bits.
  EXPECT_GT(topk.wire_bytes, 50.0 * 4.0 + 50.0);
  EXPECT_LT(topk.wire_bytes, 50.0 * 4.0 + 50.0 * 10.0 / 8.0);
  EXPECT_DOUBLE_EQ(topk.dense_bytes, 4.0 * 5000.0);
  EXPECT_GT(topk.rel_error, 0.1);  // 1% of three workers' coordinates cannot be the whole mean
  EXPECT_LT(topk.rel_error, 1.0);
  const auto& none = rows[1];
  EXPECT_EQ(none.target_density, 1.0);
  EXPECT_LT(none.rel_error, 1e-6);         // float sum of three vectors vs the double mean
  EXPECT_EQ(rows[2].target_density, 1.0);  // quantizers: no density
  EXPECT_DOUBLE_EQ(rows[2].density, 1.0);
  EXPECT_LT(rows[2].wire_bytes, none.wire_bytes);
  EXPECT_EQ(rows[3].target_density, 1.0);  // variance: its test decides, one row
  for (const auto& r : rows) {
    EXPECT_GT(r.median_ms, 0.0) << r.name;
    EXPECT_GT(r.read_ms, 0.0);
  }
  EXPECT_NE(compressor_bench_table(rows).find("qsgd-mn"), std::string::npos);
  EXPECT_NE(compressor_bench_json(rows).find("\"rel_error\""), std::string::npos);
}

TEST(CompressorBench, BadConfigsThrow) {
  CompressorBenchConfig c;
  c.n = 0;
  EXPECT_THROW(run_compressor_bench(c), gs::Error);
  c.n = 100;
  c.workers = 0;
  EXPECT_THROW(run_compressor_bench(c), gs::Error);
  c.workers = 1;
  c.names = {"sidco-z"};
  EXPECT_THROW(run_compressor_bench(c), gs::Error);
}
