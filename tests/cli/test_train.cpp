// Two workers over Gloo on loopback, through the gradscope binary: the launcher, manual placement,
// configuration checks, failure handling and the non-finite gradient policy. Short MLP runs.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "train_test_util.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/distributed/comm.hpp"

namespace {

using namespace gs::distributed::test;

// Two workers placed by hand (as on two machines), each with its own extra args and env.
std::pair<ProcResult, ProcResult> manual_pair(const std::string& common, const std::string& extra0,
                                              const std::string& extra1, const std::string& env1 = "",
                                              int limit1 = 120) {
  TempDir d;
  const int port = gs::distributed::free_loopback_port();
  auto worker = [&](int rank, const std::string& extra, const std::string& env, int limit) {
    const auto p = d.path() / std::to_string(rank);
    return "(" + env + " timeout -s KILL " + std::to_string(limit) + " " + GS_GRADSCOPE_BIN + " train " + common +
           " --workers 2 --rank " + std::to_string(rank) + " --master-port " + std::to_string(port) + " " + extra +
           " >" + p.string() + ".out 2>" + p.string() + ".err; echo $? >" + p.string() + ".rc)";
  };
  const std::string cmd =
      "bash -c '" + worker(0, extra0, "", 120) + " & " + worker(1, extra1, env1, limit1) + " & wait'";
  std::system(cmd.c_str());
  auto read = [&](int rank) {
    ProcResult r;
    const auto p = d.path() / std::to_string(rank);
    r.rc = std::stoi(slurp(p.string() + ".rc"));
    r.out = slurp(p.string() + ".out");
    r.err = slurp(p.string() + ".err");
    return r;
  };
  return {read(0), read(1)};
}

const std::string kNoLr = "--model mlp --batch 32 --seed 4 --quiet";
const std::string kShort = kNoLr + " --lr 0.05";

// A sparse payload of k pairs at this density on the wire: 4 bytes a value and a Rice-coded index
// gap of log2(1/density) to log2(1/density) + 3 bits (docs/compressors.md).
void expect_sparse_bytes(double bytes, double k, double density) {
  const double bits = std::log2(1.0 / density);
  EXPECT_GT(bytes, 4.0 * k + k * bits / 8.0);
  EXPECT_LT(bytes, 4.0 * k + k * (bits + 3.0) / 8.0);
}

double mean_loss(const nlohmann::json& steps, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += steps[i]["loss"].get<double>();
  return s / double(to - from);
}

}  // namespace

TEST(DistTraining, TwoWorkersStayEqualAndLossFalls) {
  // Sparse and dense exchanges, the variance method (per-sample variances from the model) and
  // momentum correction (the velocity in the compressor, masked where sent).
  for (const std::string comp : {"topk", "none", "sidco-e", "variance", "sidco-e --momentum-correction"}) {
    const ProcResult r =
        gradscope(kShort + " --compressor " + comp + " --ratio 0.01 --workers 2 --steps 40 --json --timeout 30");
    ASSERT_EQ(r.rc, 0) << comp << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0) << comp;
    EXPECT_EQ(j["steps_run"].get<int>(), 40);
    const auto& steps = j["per_step"];
    EXPECT_LT(mean_loss(steps, 30, 40), 0.8 * mean_loss(steps, 0, 5)) << comp;
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.3) << comp;  // chance is 0.1
    if (comp == "topk") {
      // k = floor(0.01 n) float values and their Rice-coded index gaps against 4 n dense.
      const double n = j["parameters"].get<double>();
      expect_sparse_bytes(steps[0]["bytes_sent"].get<double>(), std::floor(0.01 * n), 0.01);
      EXPECT_EQ(steps[0]["dense_bytes"].get<double>(), 4 * n);
    }
    // Each step says where SIDCo's own estimate landed (null for another method), how many groups
    // the correction ran on and how many ended on an exact top-k; the summary their shares.
    for (const auto& st : steps) {
      if (comp.starts_with("sidco-e")) {
        EXPECT_GE(st["estimate_quality"].get<double>(), 0.0) << comp;
        EXPECT_LE(st["exact"].get<int>(), st["corrected"].get<int>()) << comp;
      } else {
        EXPECT_TRUE(st["estimate_quality"].is_null()) << comp;
      }
      if (comp == "topk") {
        EXPECT_GE(st["exact"].get<int>(), 1);
      }
    }
    const auto& summary = j["summary"];
    if (comp == "topk") {
      EXPECT_EQ(summary["exact_share"].get<double>(), 1.0);
    }
    if (comp.starts_with("sidco-e")) {
      EXPECT_GE(summary["estimate_in_band"].get<double>(), 0.0);
    }
  }
}

// Compressors with their own exchange protocol (Exchange::collective): quantizers summed by
// all-reduce, and any method that all-gathers its own encoding. Append new names here.
// Each with the ratio it runs at (quantizers send every element; fft keeps a fraction of its bins).
const std::vector<std::pair<std::string, std::string>> kCollectiveCompressors = {
    {"qsgd-mn", "1"}, {"qsgd-mn-ts", "1"}, {"qsgd-mn-ms", "1"}, {"fft", "0.1"}};

TEST(DistTraining, CollectiveCompressorsTrainTwoWorkers) {
  for (const auto& [comp, ratio] : kCollectiveCompressors) {
    const ProcResult r = gradscope(kShort + " --compressor " + comp + " --ratio " + ratio +
                                   " --workers 2 --steps 40 --json --timeout 30");
    ASSERT_EQ(r.rc, 0) << comp << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0) << comp;
    EXPECT_EQ(j["steps_run"].get<int>(), 40) << comp;
    EXPECT_EQ(j["skipped_steps"].get<int>(), 0) << comp;
    const auto& steps = j["per_step"];
    for (const auto& st : steps) {
      ASSERT_TRUE(std::isfinite(st["loss"].get<double>())) << comp;
      ASSERT_GT(st["bytes_sent"].get<double>(), 0.0) << comp;
      ASSERT_LT(st["bytes_sent"].get<double>(), st["dense_bytes"].get<double>()) << comp;
    }
    EXPECT_LT(mean_loss(steps, 30, 40), 0.8 * mean_loss(steps, 0, 5)) << comp;
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.3) << comp;  // chance is 0.1
  }
}

// --bits reaches every worker: 4-bit codes of 2 workers sum in 6-bit packed lanes, 8-bit codes in
// 10-bit lanes (the scale's 4 bytes, then the words); a bad list is refused before training.
// --warmup-steps: the first steps go uncompressed (4 bytes an element by all-reduce), then the
// compressor takes over; quality describes only its steps.
TEST(DistTraining, DenseWarmupThenCompression) {
  const ProcResult r = gradscope(kShort + " --compressor topk --ratio 0.01 --workers 2 --steps 12" +
                                 " --warmup-steps 4 --json --timeout 30");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0);
  EXPECT_EQ(j["config"]["warmup_steps"].get<int>(), 4);
  const auto& steps = j["per_step"];
  ASSERT_EQ(steps.size(), 12u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const bool warm = i < 4;
    EXPECT_EQ(steps[i]["warmup"].get<bool>(), warm) << i;
    if (warm) {
      EXPECT_EQ(steps[i]["bytes_sent"].get<double>(), steps[i]["dense_bytes"].get<double>()) << i;
    } else {
      EXPECT_LT(steps[i]["bytes_sent"].get<double>(), 0.05 * steps[i]["dense_bytes"].get<double>()) << i;
    }
  }
  // top-k's own steps only: floor(0.01 n) / (0.01 n) exactly (the dense steps' 1 would shift it).
  const double n = j["parameters"].get<double>();
  EXPECT_NEAR(j["summary"]["quality_mean"].get<double>(), std::floor(0.01 * n) / (0.01 * n), 1e-12);
  EXPECT_NE(gradscope(kShort + " --compressor topk --ratio 0.1 --warmup-steps -1 --steps 1").rc, 0);
}

// --warmup-schedule exponential: the warm-up steps are compressed at a ratio falling geometrically
// from --warmup-start-ratio to --ratio (top-k sends exactly floor(ratio n) pairs of 8 bytes);
// quality describes the steps at --ratio; a start ratio not above --ratio is refused.
TEST(DistTraining, ExponentialWarmupWalksTheRatioDown) {
  const ProcResult r =
      gradscope(kShort + " --compressor topk --ratio 0.01 --workers 2 --steps 10" +
                " --warmup-steps 4 --warmup-schedule exponential" + " --warmup-start-ratio 0.16 --json --timeout 30");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0);
  EXPECT_EQ(j["config"]["warmup_schedule"].get<std::string>(), "exponential");
  EXPECT_EQ(j["config"]["warmup_start_ratio"].get<double>(), 0.16);
  const double n = j["parameters"].get<double>();
  const auto& steps = j["per_step"];
  ASSERT_EQ(steps.size(), 10u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const double ratio = i < 4 ? 0.16 * std::pow(0.01 / 0.16, double(i) / 4.0) : 0.01;  // 0.16, 0.08, 0.04, 0.02
    EXPECT_EQ(steps[i]["warmup"].get<bool>(), i < 4) << i;
    EXPECT_NEAR(steps[i]["target_density"].get<double>(), ratio, 1e-15) << i;
    SCOPED_TRACE(i);
    expect_sparse_bytes(steps[i]["bytes_sent"].get<double>(), std::floor(ratio * n), ratio);
  }
  EXPECT_NEAR(j["summary"]["quality_mean"].get<double>(), std::floor(0.01 * n) / (0.01 * n), 1e-12);
  const ProcResult low = gradscope(kShort + " --compressor topk --ratio 0.1 --steps 2 --warmup-steps 1" +
                                   " --warmup-schedule exponential --warmup-start-ratio 0.1");
  EXPECT_NE(low.rc, 0);
  EXPECT_NE(low.err.find("--warmup-start-ratio"), std::string::npos) << low.err;
  // The quantizers have no density to walk down.
  const ProcResult quant = gradscope(kShort + " --compressor qsgd-mn --ratio 1 --steps 2 --warmup-steps 1" +
                                     " --warmup-schedule exponential");
  EXPECT_NE(quant.rc, 0);
  EXPECT_NE(quant.err.find("qsgd-mn"), std::string::npos) << quant.err;
  // Without warm-up steps the schedule would do nothing: refused, as every option that does nothing.
  const ProcResult idle = gradscope(kShort + " --compressor topk --ratio 0.5 --steps 1 --warmup-schedule exponential");
  EXPECT_NE(idle.rc, 0);
  EXPECT_NE(idle.err.find("--warmup-schedule exponential does nothing without --warmup-steps"), std::string::npos)
      << idle.err;
  EXPECT_NE(
      gradscope(kShort + " --compressor topk --ratio 0.1 --steps 2 --warmup-steps 1" + " --warmup-schedule linear").rc,
      0);
}

// --lr-schedule cosine: every step's rate is lr * (1 + cos(pi * step / steps)) / 2 on both workers
// (the replicas stay equal); step: lr / 10 over the last tenth of the steps; the default keeps
// --lr; an unknown schedule is refused.
TEST(DistTraining, ScheduleSetsEveryStepsRate) {
  const ProcResult r = gradscope(kShort + " --compressor topk --ratio 0.1 --workers 2 --steps 8" +
                                 " --lr-schedule cosine --json --timeout 30");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["lr_schedule"].get<std::string>(), "cosine");
  EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0);
  const auto& steps = j["per_step"];
  ASSERT_EQ(steps.size(), 8u);
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_NEAR(steps[i]["lr"].get<double>(), 0.025 * (1.0 + std::cos(M_PI * double(i) / 8.0)), 1e-15) << i;
  const ProcResult flat = gradscope(kShort + " --compressor topk --ratio 0.1 --steps 3 --json");
  ASSERT_EQ(flat.rc, 0) << flat.err;
  const auto jf = nlohmann::json::parse(flat.out);
  EXPECT_EQ(jf["config"]["lr_schedule"].get<std::string>(), "constant");
  for (const auto& st : jf["per_step"]) EXPECT_EQ(st["lr"].get<double>(), 0.05);
  // 20 steps: the last 2 at a tenth.
  const ProcResult st = gradscope(kShort + " --compressor topk --ratio 0.1 --steps 20 --lr-schedule step --json");
  ASSERT_EQ(st.rc, 0) << st.err;
  const auto js = nlohmann::json::parse(st.out);
  EXPECT_EQ(js["config"]["lr_schedule"].get<std::string>(), "step");
  ASSERT_EQ(js["per_step"].size(), 20u);
  for (std::size_t i = 0; i < 20; ++i)
    EXPECT_EQ(js["per_step"][i]["lr"].get<double>(), i < 18 ? 0.05 : 0.1 * 0.05) << i;
  EXPECT_NE(gradscope(kShort + " --compressor topk --ratio 0.1 --steps 1 --lr-schedule linear").rc, 0);
}

// Every worker pins its compute threads, the BLAS pool included: a seed gives the same floats
// whatever thread count the environment asks the BLAS for (unpinned, 1 and 4 threads split the
// matrix products' sums differently and the losses part within a few steps).
TEST(DistTraining, TheEnvironmentsBlasThreadsDoNotChangeTheRun) {
  // Only meaningful where the pool exists and more than one thread could split a product.
  if (!dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) GTEST_SKIP() << "libtorch does not run on OpenBLAS here";
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: OpenBLAS would use one thread anyway";
  const std::string args = kShort + " --compressor none --ratio 1 --workers 2 --steps 20 --json --timeout 30";
  const ProcResult one = gradscope(args, "env -u OMP_NUM_THREADS OPENBLAS_NUM_THREADS=1");
  const ProcResult four = gradscope(args, "env -u OMP_NUM_THREADS OPENBLAS_NUM_THREADS=4");
  ASSERT_EQ(one.rc, 0) << one.err;
  ASSERT_EQ(four.rc, 0) << four.err;
  const auto a = nlohmann::json::parse(one.out)["per_step"];
  const auto b = nlohmann::json::parse(four.out)["per_step"];
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << "step " << i;
}

TEST(DistTraining, QuantizerBitsAreForwardedAndChecked) {
  // 2 workers: offset codes sum in 6-bit lanes (10 per int64 word) at 4 bits, 10-bit lanes (6 per
  // word) at 8 bits.
  for (const auto& [bits, lanes] : {std::pair<std::string, double>{"4", 10}, {"8", 6}}) {
    const ProcResult r =
        gradscope(kShort + " --compressor qsgd-mn --bits " + bits + " --workers 2 --steps 3 --json --timeout 30");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const double n = j["parameters"].get<double>();
    EXPECT_EQ(j["per_step"][0]["bytes_sent"].get<double>(), 4 + 8 * std::ceil(n / lanes)) << bits;
    // Every element is sent as a code: the target is 1 whatever --ratio says (default 0.01).
    EXPECT_EQ(j["summary"]["quality_mean"].get<double>(), 1.0) << bits;
    for (const auto& st : j["per_step"]) EXPECT_EQ(st["target_density"].get<double>(), 1.0) << bits;
  }
  const ProcResult bad = gradscope(kShort + " --compressor qsgd-mn-ts --bits 10,6 --steps 1");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("ascending"), std::string::npos) << bad.err;
}

// Workers placed by hand (a process each), forked by the launcher, and started anew by it
// (GS_TRAIN_EXEC_WORKERS=1) end with the same parameters.
TEST(DistTraining, ManualPlacementMatchesTheLauncher) {
  const std::string common = kShort + " --compressor topk --ratio 0.05 --steps 15 --timeout 30";
  const auto [r0, r1] = manual_pair(common, "--json", "");
  ASSERT_EQ(r0.rc, 0) << r0.err;
  ASSERT_EQ(r1.rc, 0) << r1.err;
  const auto manual = nlohmann::json::parse(r0.out);
  const ProcResult launched = gradscope(common + " --workers 2 --json");
  ASSERT_EQ(launched.rc, 0) << launched.err;
  const auto j = nlohmann::json::parse(launched.out);
  EXPECT_EQ(manual["final_loss"].get<double>(), j["final_loss"].get<double>());
  EXPECT_EQ(manual["test_accuracy"].get<double>(), j["test_accuracy"].get<double>());
  EXPECT_EQ(manual["param_digest"], j["param_digest"]);
  // The launcher forks its workers (libtorch loaded once); started anew instead, they end alike.
  const ProcResult exec = gradscope(common + " --workers 2 --json", "GS_TRAIN_EXEC_WORKERS=1");
  ASSERT_EQ(exec.rc, 0) << exec.err;
  EXPECT_EQ(nlohmann::json::parse(exec.out)["param_digest"], j["param_digest"]);
}

TEST(DistTraining, MismatchedConfigurationsAreRefused) {
  const auto [r0, r1] =
      manual_pair(kNoLr + " --compressor topk --ratio 0.01 --steps 5 --timeout 20", "--lr 0.05", "--lr 0.1");
  EXPECT_NE(r0.rc, 0);
  EXPECT_NE(r1.rc, 0);
  // Both stop with the same line, naming the setting and both values.
  for (const std::string& err : {r0.err, r1.err})
    EXPECT_NE(err.find("the workers' settings differ: --lr is 0.1 on worker 1 and 0.05 on worker 0"), std::string::npos)
        << err;
}

TEST(DistTraining, DeadWorkerStopsTheLauncher) {
  const ProcResult r = gradscope(kShort + " --compressor topk --ratio 0.01 --workers 2 --steps 200",
                                 "GS_DIST_FAULT=rank=1,step=5,action=exit");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("worker 1 failed"), std::string::npos) << r.err;
}

TEST(DistTraining, PeerThatDiesOrHangsMakesTheOtherFail) {
  for (const std::string action : {"exit", "hang"}) {
    const auto [r0, r1] = manual_pair(kShort + " --compressor topk --ratio 0.01 --steps 200 --timeout 4", "", "",
                                      "GS_DIST_FAULT=rank=1,step=3,action=" + action, 20);
    // Rank 0 ends on its own with an error (the 120 s kill would give 137) after --timeout 4; a
    // hung rank 1 only ends by its 20 s kill.
    EXPECT_EQ(r0.rc, 1) << action << ": " << r0.err;
    EXPECT_NE(r0.err.find("failed"), std::string::npos) << r0.err;
    EXPECT_NE(r0.err.find("--timeout 4 s,"), std::string::npos) << r0.err;  // as people write it
    if (action == "exit") {
      EXPECT_EQ(r1.rc, 7);
    }
  }
}

TEST(DistTraining, NonFiniteGradientSkipsTheStepEverywhere) {
  const ProcResult r = gradscope(kShort + " --compressor topk --ratio 0.01 --workers 2 --steps 12 --json",
                                 "GS_DIST_FAULT=rank=1,step=4,action=nan");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["skipped_steps"].get<int>(), 1);
  EXPECT_TRUE(j["per_step"][4]["skipped"].get<bool>());
  EXPECT_EQ(j["replica_max_diff"].get<double>(), 0.0);
  // A skipped warm-up step still reports that it was one, and the ratio it was due to run at.
  const ProcResult w = gradscope(kShort + " --compressor topk --ratio 0.01 --workers 2 --steps 6 --json" +
                                     " --warmup-steps 4 --warmup-schedule exponential --warmup-start-ratio 0.16",
                                 "GS_DIST_FAULT=rank=1,step=2,action=nan");
  ASSERT_EQ(w.rc, 0) << w.err;
  const auto jw = nlohmann::json::parse(w.out);
  EXPECT_TRUE(jw["per_step"][2]["skipped"].get<bool>());
  EXPECT_TRUE(jw["per_step"][2]["warmup"].get<bool>());
  EXPECT_NEAR(jw["per_step"][2]["target_density"].get<double>(), 0.04, 1e-15);
  EXPECT_EQ(jw["replica_max_diff"].get<double>(), 0.0);
}

TEST(DistTraining, BadOptionsAreRefused) {
  EXPECT_NE(gradscope("--compressor topk --ratio 1.5 --steps 1").rc, 0);
  const ProcResult unknown = gradscope("--compressor sidco-z --ratio 0.01 --steps 1");
  EXPECT_NE(unknown.rc, 0);
  EXPECT_NE(unknown.err.find("sidco-gp"), std::string::npos) << unknown.err;
  const ProcResult mc = gradscope("--compressor none --ratio 1 --momentum-correction --steps 1");
  EXPECT_NE(mc.rc, 0);
  EXPECT_NE(mc.err.find("--momentum-correction"), std::string::npos) << mc.err;
  EXPECT_NE(gradscope("--compressor topk --ratio 0.1 --momentum 1 --steps 1").rc, 0);
}

TEST(DistTraining, RecordCapturesRawGradientsWhileTraining) {
  TempDir d;
  const auto file = d.path() / "grads.h5";
  const ProcResult r = gradscope(kShort + " --compressor sidco-e --ratio 0.01 --steps 3 --record " + file.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  gs::data::SnapshotReader reader(file);
  EXPECT_EQ(reader.step_count(), 3u);
  ASSERT_EQ(reader.layers().size(), 6u);
  EXPECT_EQ(reader.layers()[0].name, "fc1.weight");
  const auto g = reader.read(2, 0);
  EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }));
  // An existing file is never overwritten without --force.
  const ProcResult again = gradscope(kShort + " --compressor topk --steps 1 --record " + file.string());
  EXPECT_NE(again.rc, 0);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
}
