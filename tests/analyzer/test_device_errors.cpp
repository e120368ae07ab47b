// A failure of the device during an analysis never becomes a row: the analysis stops with it
// (the steps before it kept), or with on_device_error "cpu" the interrupted step and the rest run
// on the CPU, as the result says. The cuda-host backend provides the failures (an out-of-memory
// injected at every part of the analysis in turn).
#include <gtest/gtest.h>

#include <string>

#include "analyzer/same_store.hpp"
#include "analyzer/synthetic_snapshot.hpp"
#include "common/device_faults.hpp"
#include "common/temp_dir.hpp"
#include "gs/analyzer/analyze.hpp"
#include "gs/kernels/device.hpp"

namespace gs::analyzer {
namespace {

using gs::testing::TempDir;

// No stored row says anything of a device failure.
void expect_no_device_rows(const std::filesystem::path& file) {
  const AnalysisReader r(file);
  for (const auto& f : r.fits())
    EXPECT_EQ(f.error.find("out of memory"), std::string::npos) << f.step << " " << f.scope << " " << f.dist;
  for (const auto& t : r.thresholds())
    EXPECT_EQ(t.error.find("out of memory"), std::string::npos) << t.step << " " << t.scope << " " << t.method;
}

template <class Row>
std::vector<Row> from_step(const std::vector<Row>& rows, std::int64_t step) {
  std::vector<Row> out;
  for (const auto& r : rows)
    if (r.step >= step) out.push_back(r);
  return out;
}

TEST(AnalyzeDeviceErrors, StopOrRetryOnTheCpuButNeverARow) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / "device.h5";
  c.backend = "cuda-host";
  c.densities = {0.01};
  c.force = true;
  AnalyzeConfig cpu = c;
  cpu.backend = "cpu";
  cpu.output = dir / "cpu.h5";
  analyze(cpu);
  const AnalysisReader reference(cpu.output);

  const std::int64_t allocations = gs::testing::cuda_host_allocations([&] { analyze(c); });
  // Every vector allocates: the failures below land all over both steps. (A small count means a
  // failure was swallowed early: cuda_host_allocations stops at the first.)
  ASSERT_GT(allocations, 16);
  for (int part = 0; part < 16; ++part) {
    const std::int64_t after = allocations * part / 16;
    SCOPED_TRACE("out of memory after " + std::to_string(after) + " of " + std::to_string(allocations) +
                 " allocations");
    // Retried on the CPU: the result names the failure, the rows from its step on are the CPU's.
    AnalyzeConfig retry = c;
    retry.on_device_error = "cpu";
    AnalyzeResult r;
    {
      gs::testing::InjectedOutOfMemory oom(after);
      r = analyze(retry);
    }
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.device_error_backend, "cuda-host");
    EXPECT_NE(r.device_error.find("out of memory"), std::string::npos) << r.device_error;
    EXPECT_EQ(r.steps_analyzed, 2u);
    EXPECT_EQ(r.vectors_analyzed, 12u);
    expect_no_device_rows(c.output);
    {
      const AnalysisReader got(c.output);  // closed before the next run replaces the file
      test::expect_same_rows(from_step(got.fits(), r.device_error_step),
                             from_step(reference.fits(), r.device_error_step), "fits");
      test::expect_same_rows(from_step(got.thresholds(), r.device_error_step),
                             from_step(reference.thresholds(), r.device_error_step), "thresholds");
    }

    // Stopped: the same failure comes out as it was; the steps before it are stored, nothing of it.
    {
      gs::testing::InjectedOutOfMemory oom(after);
      try {
        analyze(c);
        ADD_FAILURE() << "the analysis finished after a device failure";
      } catch (const kernels::DeviceError& e) {
        EXPECT_TRUE(e.out_of_memory());
        EXPECT_EQ(e.what(), r.device_error);
      }
    }
    expect_no_device_rows(c.output);
    for (const auto& s : AnalysisReader(c.output).steps()) EXPECT_LT(s.step, r.device_error_step);
  }
}

TEST(AnalyzeDeviceErrors, TheChoiceIsChecked) {
  AnalyzeConfig c;
  c.input = "snap.h5";
  c.output = "out.h5";
  c.on_device_error = "retry";
  try {
    c.validate();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'retry': use stop, cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gs::analyzer
