// The kernel benchmark's ledger on the cuda-host backend: each row of a device backend says what
// one call queued (launches, the passes over the vector) and the cost model's time for it
// (docs/gpu.md, "The cost model"); cuda-host rows are counted, not timed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gs/bench/kernels_bench.hpp"
#include "gs/kernels/device.hpp"

using namespace gs::bench;

TEST(KernelsBench, CudaHostRowsGiveTheLedgerAndTheModelNotATime) {
  KernelBenchConfig c;
  c.backend = BackendKind::cuda_host;
  c.sizes = {200'000};
  c.densities = {0.01};
  const auto rows = run_kernels_bench(c);
  std::map<std::string, KernelBenchRow> by;
  for (const auto& r : rows) by[r.method] = r;
  ASSERT_TRUE(by.count("read") && by.count("sidco-e:resident") && by.count("topk:resident"));
  // the read pass: the block reduction and its merge, one pass over the vector
  EXPECT_EQ(by["read"].launches, 2u);
  EXPECT_DOUBLE_EQ(by["read"].vector_passes, 1.0);
  for (const auto& r : rows) {
    SCOPED_TRACE(r.method);
    EXPECT_TRUE(std::isnan(r.median_ms)) << "cuda-host runs are counted, not timed";
    EXPECT_GT(r.launches, 0u);
    EXPECT_DOUBLE_EQ(r.model_ms, gs::kernels::modelled_ms(r.launches, r.vector_passes * double(r.n)));
  }
  // a resident selection queues more than its threshold's passes alone
  EXPECT_GT(by["sidco-e:resident"].launches, by["sidco-e"].launches);
  EXPECT_GE(by["sidco-e:resident"].vector_passes, by["sidco-e"].vector_passes);
  EXPECT_NE(kernels_bench_table(rows).find("model_ms"), std::string::npos);
  EXPECT_NE(kernels_bench_json(c, rows).find("\"launches\":"), std::string::npos);
}

TEST(KernelsBench, TheModelIsLaunchesAndBytes) {
  // the constants: 12 us a launch, 3.64 TB/s (cdd4df1's H200 read pass at 1e7 and 1e8)
  EXPECT_NEAR(gs::kernels::modelled_ms(2, 1e7), 0.035, 0.001);
  EXPECT_NEAR(gs::kernels::modelled_ms(2, 1e8), 0.134, 0.001);
  EXPECT_DOUBLE_EQ(gs::kernels::modelled_ms(0, 0), 0.0);
}
