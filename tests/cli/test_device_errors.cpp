// `gradscope fit` and `gradscope analyze` when the device fails (an out-of-memory injected into the
// cuda-host backend through GS_CUDA_HOST_FAIL_ALLOCATION_AFTER): by default they stop with one line
// naming the failure and print no result; with --on-device-error cpu they run the work again on
// the CPU, say so on stderr and in the JSON, and print the CPU's results.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analyzer/synthetic_snapshot.hpp"
#include "cli/gradscope_run.hpp"
#include "common/device_faults.hpp"
#include "common/temp_dir.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::analyzer {
namespace {

using gs::testing::CliRun;
using gs::testing::run_gradscope;
using gs::testing::TempDir;

std::string fail_after(std::int64_t n) { return "GS_CUDA_HOST_FAIL_ALLOCATION_AFTER=" + std::to_string(n); }

std::size_t lines(const std::string& s) { return std::size_t(std::count(s.begin(), s.end(), '\n')); }

// The stop: exit 1, one line on stderr naming the failure and the way around it, nothing on stdout.
void expect_stopped(const CliRun& r) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("gradscope: error: device failure: CUDA error: cudaErrorMemoryAllocation (out of memory)", 0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("pass --on-device-error cpu"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(DeviceErrorsCli, FitStopsOrFitsAgainOnTheCpu) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  const std::string input = (dir / "snap.h5").string();
  // The allocations of this fit on cuda-host, counted in-process: failures at the start and in
  // the middle of the fits and methods.
  const data::SnapshotReader reader(dir / "snap.h5");
  const std::vector<float> model = read_vector(reader, choose_vector(reader, std::nullopt, std::nullopt));
  const std::int64_t allocations = gs::testing::cuda_host_allocations([&] {
    const auto passes = kernels::make_passes(model, kernels::BackendKind::cuda_host);
    fitting::fit_report(*passes);
  });
  ASSERT_GT(allocations, 2);

  const CliRun reference = run_gradscope("fit " + input + " --backend cpu --json", dir);
  ASSERT_EQ(reference.status, 0) << reference.err;
  const auto ref = nlohmann::json::parse(reference.out);
  for (const std::int64_t after : {std::int64_t{0}, allocations / 2}) {
    SCOPED_TRACE("out of memory after " + std::to_string(after) + " allocations");
    expect_stopped(run_gradscope("fit " + input + " --backend cuda-host --json", dir, fail_after(after)));
    expect_stopped(run_gradscope("fit " + input + " --backend cuda-host", dir, fail_after(after)));

    const CliRun r =
        run_gradscope("fit " + input + " --backend cuda-host --on-device-error cpu --json", dir, fail_after(after));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("gradscope: warning: device failure on the cuda-host backend (CUDA error: "
                         "cudaErrorMemoryAllocation (out of memory)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("fitted again on the CPU backend"), std::string::npos) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_NE(j["device_error"].get<std::string>().find("out of memory"), std::string::npos);
    EXPECT_EQ(j["fits"], ref["fits"]);  // the CPU's report, no row of the failure
    EXPECT_EQ(j["thresholds"], ref["thresholds"]);
  }
  EXPECT_FALSE(ref.contains("device_error"));
  // A table on a terminal says the backend too.
  const CliRun table = run_gradscope("fit " + input + " --backend cuda-host --on-device-error cpu", dir, fail_after(0));
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("backend cpu"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("out of memory"), std::string::npos) << table.out;
  // Only stop and cpu.
  const CliRun bad = run_gradscope("fit " + input + " --on-device-error retry", dir);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--on-device-error"), std::string::npos) << bad.err;
}

TEST(DeviceErrorsCli, AnalyzeStopsOrAnalysesOnTheCpu) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  const std::string base =
      (dir / "snap.h5").string() + " --ratios 0.01 --backend cuda-host --force --out " + (dir / "a.h5").string();
  CliRun r = run_gradscope("analyze " + base + " --quiet", dir, fail_after(0));
  expect_stopped(r);
  EXPECT_NE(r.err.find("the steps analysed before it stay in"), std::string::npos) << r.err;

  r = run_gradscope("analyze " + base + " --json --on-device-error cpu", dir, fail_after(0));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("gradscope: warning: device failure on the cuda-host backend (CUDA error: "
                       "cudaErrorMemoryAllocation (out of memory)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("step 0 and the later ones were analysed on the CPU backend"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["device_error_backend"], "cuda-host");
  EXPECT_EQ(j["device_error_step"], 0);
  EXPECT_NE(j["device_error"].get<std::string>().find("out of memory"), std::string::npos);
  EXPECT_EQ(j["steps_analyzed"], 2);
  {
    const AnalysisReader store(dir / "a.h5");  // closed before the next run replaces the file
    for (const auto& f : store.fits()) EXPECT_EQ(f.error.find("out of memory"), std::string::npos) << f.scope;
    for (const auto& t : store.thresholds())
      EXPECT_EQ(t.error.find("out of memory"), std::string::npos) << t.scope << " " << t.method;
  }

  // Without a failure: the backend asked for, no device_error.
  r = run_gradscope("analyze " + base + " --json --on-device-error cpu", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto clean = nlohmann::json::parse(r.out);
  EXPECT_EQ(clean["backend"], "cuda-host");
  EXPECT_FALSE(clean.contains("device_error"));
}

}  // namespace
}  // namespace gs::analyzer
