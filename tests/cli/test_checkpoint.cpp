// Checkpoint, resume and restart of `gradscope train` (two workers, short MLP runs): a run that
// resumes from either of two checkpoints, or that loses a worker and is restarted by the launcher,
// ends with the same parameters (param_digest) as the same run uninterrupted; checkpoints that are
// corrupt, truncated or of another configuration are refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train_test_util.hpp"

namespace {

using namespace gs::distributed::test;

const std::string kRun = "--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --workers 2 --steps 12";

nlohmann::json json_of(const ProcResult& r) {
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.rc == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::string one_line(const ProcResult& r) {
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  return r.err;
}

// The losses of every step, as the run reports them (the resumed part and the restored part).
std::vector<double> losses(const nlohmann::json& j) {
  std::vector<double> v;
  for (const auto& s : j["per_step"]) v.push_back(s["loss"].get<double>());
  return v;
}

fs::path step_dir(const fs::path& root, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", step);
  return root / name;
}

// The stage controller's window (sidco-e) carries over either checkpoint; a random stream
// (randomk) and per-tensor sums (variance) over the later one, which has seen the most of them.
TEST(Checkpoint, ResumingFromEitherCheckpointGivesTheSameParameters) {
  for (const std::string comp : {"sidco-e", "randomk", "variance"}) {
    const bool both = comp == "sidco-e";
    TempDir d;
    const fs::path root = d.path() / "ckpt";
    const std::string run = kRun + " --compressor " + comp + " --ratio 0.01 --json";
    const auto full = json_of(gradscope(run + " --checkpoint " + root.string() + " --checkpoint-every 4"));
    const std::string digest = full["param_digest"];
    ASSERT_EQ(digest.size(), 64u);
    // Checkpoints after steps 4 and 8 (none after the last step), both kept.
    ASSERT_TRUE(fs::exists(step_dir(root, 4) / "manifest.json"));
    ASSERT_TRUE(fs::exists(step_dir(root, 8) / "manifest.json"));
    EXPECT_FALSE(fs::exists(step_dir(root, 12)));
    // Each checkpoint by name, or (--resume DIR) the latest complete one: step 8's.
    std::vector<std::pair<int, fs::path>> resumes{{8, root}};
    if (both) resumes = {{4, step_dir(root, 4)}, {8, step_dir(root, 8)}};
    for (const auto& [step, from] : resumes) {
      const auto resumed = json_of(gradscope(run + " --resume " + from.string()));
      EXPECT_EQ(resumed["param_digest"], digest) << comp << " from step " << step;
      EXPECT_EQ(resumed["resumed_from_step"].get<int>(), step);
      EXPECT_EQ(losses(resumed), losses(full)) << comp << " from step " << step;
      EXPECT_EQ(resumed["test_accuracy"], full["test_accuracy"]);
    }
  }
  // The digest tells runs apart: another seed ends elsewhere.
  const auto a = json_of(gradscope(kRun + " --compressor topk --ratio 0.01 --json"));
  std::string other_seed = kRun;
  other_seed.replace(other_seed.find("--seed 4"), 8, "--seed 5");
  const auto b = json_of(gradscope(other_seed + " --compressor topk --ratio 0.01 --json"));
  EXPECT_NE(a["param_digest"], b["param_digest"]);
}

// Accordion's density schedule (its detector's sums mid-interval, the regime, the norm compared
// with) and momentum correction's velocities carry over a checkpoint: the resumed run takes the
// same decisions at the same steps and ends with the same parameters.
TEST(Checkpoint, TheDensityScheduleAndMomentumCorrectionResumeExactly) {
  for (const std::string extra : {" --density-schedule accordion --density-interval 3 --density-eta 0.1",
                                  " --density-schedule accordion --density-interval 3 --density-eta 0.1"
                                  " --momentum-correction --warmup-steps 2"}) {
    TempDir d;
    const fs::path root = d.path() / "ckpt";
    const std::string run = kRun + " --compressor sidco-e --ratio 0.01 --json" + extra;
    const auto full = json_of(gradscope(run + " --checkpoint " + root.string() + " --checkpoint-every 4"));
    std::vector<bool> critical;
    for (const auto& s : full["per_step"]) critical.push_back(s["critical"].get<bool>());
    EXPECT_EQ(full["summary"]["critical_steps"].get<int>(), std::count(critical.begin(), critical.end(), true));
    EXPECT_TRUE(critical[3]) << "a run starts critical, and the first check keeps it";
    for (int step : {4, 8}) {  // mid-interval: checks after steps 3, 6, 9 and 12
      const auto resumed = json_of(gradscope(run + " --resume " + step_dir(root, step).string()));
      EXPECT_EQ(resumed["param_digest"], full["param_digest"]) << extra << " from step " << step;
      EXPECT_EQ(losses(resumed), losses(full)) << extra << " from step " << step;
      std::vector<bool> again;
      for (const auto& s : resumed["per_step"]) again.push_back(s["critical"].get<bool>());
      EXPECT_EQ(again, critical) << extra << " from step " << step;
    }
  }
}

// Checkpoints at realistic steps, past every window a state carries: SIDCo's stage controller
// (5 steps), Accordion's interval (20 by default: checks after steps 20 and 40), a 5-step warm-up
// and momentum correction. A run without a schedule could once not resume from any checkpoint after
// step 20 ("its density schedule's state is inconsistent"), for every compressor. The checkpoint
// after step 50 is past all of them; one mid-interval (after 25) for the schedules, whose sums
// mid-interval TheDensityScheduleAndMomentumCorrectionResumeExactly resumes at short intervals.
TEST(Checkpoint, ResumesPastEveryWindowAtRealisticSteps) {
  const std::string base = "--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --workers 2 --steps 56 --json";
  for (const std::string setup :
       {" --compressor topk --ratio 0.01", " --compressor sidco-e --ratio 0.01",
        " --compressor sidco-e --ratio 0.01 --momentum-correction --warmup-steps 5",
        " --compressor sidco-gp --ratio 0.01 --density-schedule accordion --warmup-steps 5",
        " --compressor dgc --ratio 0.01 --density-schedule accordion --momentum-correction"}) {
    TempDir d;
    const fs::path root = d.path() / "ckpt";
    const auto full = json_of(gradscope(base + setup + " --checkpoint " + root.string() + " --checkpoint-every 25"));
    ASSERT_TRUE(fs::exists(step_dir(root, 50) / "manifest.json")) << setup;
    const bool schedule = setup.find("accordion") != std::string::npos;
    for (int step : {25, 50}) {
      if (step == 25 && !schedule) continue;
      const auto resumed = json_of(gradscope(base + setup + " --resume " + step_dir(root, step).string()));
      EXPECT_EQ(resumed["resumed_from_step"].get<int>(), step) << setup;
      EXPECT_EQ(resumed["param_digest"], full["param_digest"]) << setup << " from step " << step;
      EXPECT_EQ(losses(resumed), losses(full)) << setup << " from step " << step;
    }
  }
}

// A worker killed (SIGKILL) at step 38: the launcher restarts every worker from the checkpoint
// after step 25, and the run ends as the uninterrupted one.
TEST(Checkpoint, AKilledWorkerPastStep20IsRestartedFromItsCheckpoint) {
  const std::string run =
      "--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --workers 2 --steps 45 --json "
      "--compressor sidco-e --ratio 0.01 --momentum-correction";
  const auto uninterrupted = json_of(gradscope(run));
  TempDir d;
  const fs::path root = d.path() / "ckpt";
  const ProcResult r = gradscope(run + " --checkpoint " + root.string() + " --checkpoint-every 25 --max-restarts 1",
                                 "GS_DIST_FAULT=rank=1,step=38,action=kill");
  const auto restarted = json_of(r);
  EXPECT_NE(r.err.find("worker 1 failed (signal Killed)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 1, from " + step_dir(root, 25).string()), std::string::npos) << r.err;
  EXPECT_EQ(restarted["resumed_from_step"].get<int>(), 25);
  EXPECT_EQ(restarted["param_digest"], uninterrupted["param_digest"]);
}

TEST(Checkpoint, ALostWorkerIsRestartedFromTheLastCheckpoint) {
  TempDir d;
  const fs::path root = d.path() / "ckpt";
  const std::string run =
      kRun + " --compressor sidco-e --ratio 0.01 --json --checkpoint " + root.string() + " --checkpoint-every 4";
  const auto uninterrupted = json_of(gradscope(kRun + " --compressor sidco-e --ratio 0.01 --json"));
  const ProcResult r = gradscope(run + " --max-restarts 1", "GS_DIST_FAULT=rank=1,step=9,action=exit");
  const auto restarted = json_of(r);
  EXPECT_NE(r.err.find("worker 1 failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 1, from " + step_dir(root, 8).string()), std::string::npos) << r.err;
  EXPECT_EQ(restarted["param_digest"], uninterrupted["param_digest"]);
  EXPECT_EQ(restarted["resumed_from_step"].get<int>(), 8);
  // A worker that dies in every attempt: once out of restarts, the failure stands.
  TempDir d2;
  const ProcResult out = gradscope(kRun + " --compressor sidco-e --ratio 0.01 --checkpoint " +
                                       (d2.path() / "c").string() + " --checkpoint-every 4 --max-restarts 1",
                                   "GS_DIST_FAULT=rank=1,step=9,action=exit,attempt=any");
  EXPECT_NE(out.rc, 0);
  EXPECT_NE(out.err.find("restart 1 of 1"), std::string::npos) << out.err;
  EXPECT_NE(out.err.rfind("worker 1 failed"), out.err.find("worker 1 failed")) << out.err;
}

TEST(Checkpoint, CheckpointsThatDoNotFitAreRefusedInOneLine) {
  TempDir d;
  const fs::path root = d.path() / "ckpt";
  const std::string any_model = "--batch 32 --seed 4 --quiet --steps 12 --compressor sidco-e --ratio 0.01";
  const std::string base = any_model + " --model mlp";
  ASSERT_EQ(gradscope(base + " --lr 0.05 --workers 2 --checkpoint " + root.string() + " --checkpoint-every 4").rc, 0);
  const std::string resume = " --resume " + root.string();
  EXPECT_NE(one_line(gradscope(base + " --lr 0.05 --workers 3" + resume)).find("written by 2 workers"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope(any_model + " --lr 0.05 --workers 2 --model cnn" + resume)).find("model mlp"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope("--model mlp --batch 32 --seed 4 --quiet --steps 12 --compressor topk "
                               "--ratio 0.01 --lr 0.05 --workers 2" +
                               resume))
                .find("compressor sidco-e"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope(base + " --lr 0.1 --workers 2" + resume)).find("--lr 0.05 (this run: 0.1)"),
            std::string::npos);
  // Old checkpoints are never mixed with a new run's, nor deleted without --force.
  EXPECT_NE(one_line(gradscope(base + " --lr 0.05 --workers 2 --checkpoint " + root.string() + " --checkpoint-every 4"))
                .find("--force"),
            std::string::npos);

  // The latest checkpoint's rank 1 file: one byte flipped, then cut short.
  const fs::path file = step_dir(root, 8) / "rank-1.ckpt";
  const auto size = fs::file_size(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(size - 10));
    const char c = char(f.get() ^ 0x5a);
    f.seekp(std::streamoff(size - 10));
    f.put(c);
  }
  const std::string ok = base + " --lr 0.05 --workers 2 --json";
  EXPECT_NE(one_line(gradscope(ok + resume)).find("rank-1.ckpt is corrupt"), std::string::npos);
  {  // a file of another version of the format
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.write("GSCKPT01", 8);
  }
  EXPECT_NE(one_line(gradscope(ok + resume)).find("rank-1.ckpt is of another gradscope version (GSCKPT01"),
            std::string::npos);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.write("GSCKPT03", 8);
  }
  fs::resize_file(file, size - 100);
  EXPECT_NE(one_line(gradscope(ok + resume)).find("rank-1.ckpt is truncated"), std::string::npos);
  fs::remove(file);
  EXPECT_NE(one_line(gradscope(ok + resume)).find("rank-1.ckpt is missing"), std::string::npos);
  // The checkpoint before it is still whole.
  EXPECT_EQ(json_of(gradscope(ok + " --resume " + step_dir(root, 4).string()))["resumed_from_step"].get<int>(), 4);
  // Nothing to resume from.
  EXPECT_NE(one_line(gradscope(ok + " --resume " + (d.path() / "nothing").string())).find("no such directory"),
            std::string::npos);
}

// The step-* directories under root, by name.
std::vector<std::string> checkpoint_names(const fs::path& root) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(root)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// --keep-checkpoints K keeps the K latest; 1 is kept even when the run dies writing the next one,
// and the resumed run ends where the uninterrupted one does.
TEST(Checkpoint, OnlyTheLatestAreKeptAndAKillMidWriteLosesNone) {
  TempDir d;
  const fs::path root = d.path() / "ckpt";
  const std::string run = kRun + " --compressor sidco-e --ratio 0.01 --json";
  const std::string every = " --checkpoint " + root.string() + " --checkpoint-every 2";
  const auto full = json_of(gradscope(run + every));  // checkpoints at 2, 4, .., 10
  EXPECT_EQ(checkpoint_names(root), (std::vector<std::string>{"step-00000008", "step-00000010"}));
  fs::remove_all(root);
  ASSERT_EQ(gradscope(run + every + " --keep-checkpoints 3").rc, 0);
  EXPECT_EQ(checkpoint_names(root), (std::vector<std::string>{"step-00000006", "step-00000008", "step-00000010"}));

  // Rank 1 is killed halfway through its file of the checkpoint after step 6; with one kept, the
  // one after step 4 must still be there, whole.
  fs::remove_all(root);
  const ProcResult killed =
      gradscope(run + every + " --keep-checkpoints 1", "GS_DIST_FAULT=rank=1,step=6,action=kill-in-checkpoint");
  EXPECT_NE(killed.rc, 0);
  EXPECT_NE(killed.err.find("worker 1"), std::string::npos) << killed.err;
  EXPECT_FALSE(fs::exists(step_dir(root, 6) / "manifest.json"));
  EXPECT_FALSE(fs::exists(step_dir(root, 6) / "rank-1.ckpt"));
  bool half_written = false;
  for (const auto& e : fs::directory_iterator(step_dir(root, 6)))
    half_written |= e.path().filename().string().starts_with("rank-1.ckpt.tmp.");
  EXPECT_TRUE(half_written);
  EXPECT_TRUE(fs::exists(step_dir(root, 4) / "manifest.json"));
  EXPECT_FALSE(fs::exists(step_dir(root, 2)));
  // The resumed run picks step 4 (the newest complete one), rewrites step 6, ends as the
  // uninterrupted run, and its pruning removes what the kill left.
  const auto resumed = json_of(gradscope(run + every + " --keep-checkpoints 1 --resume " + root.string()));
  EXPECT_EQ(resumed["resumed_from_step"].get<int>(), 4);
  EXPECT_EQ(resumed["param_digest"], full["param_digest"]);
  EXPECT_EQ(checkpoint_names(root), std::vector<std::string>{"step-00000010"});
}

TEST(Checkpoint, BadCheckpointOptionsAreRefused) {
  EXPECT_NE(one_line(gradscope("--steps 2 --checkpoint /tmp/x --checkpoint-every 1 --keep-checkpoints 0"))
                .find("--keep-checkpoints must be at least 1"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope("--steps 2 --checkpoint /tmp/x")).find("--checkpoint-every"), std::string::npos);
  EXPECT_NE(one_line(gradscope("--steps 2 --workers 2 --max-restarts 1 --record /tmp/x.h5")).find("--record"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope("--steps 2 --max-restarts 1")).find("launcher"), std::string::npos);
}

}  // namespace

namespace {

// --compress-when auto, --exchange shared and sparse-allreduce: every worker takes the same choice (the replicas end
// equal: workers that chose otherwise would call other collectives), a run resumes to the bit
// past a choice, and settings that would do nothing are refused.
TEST(ExchangeModes, AutoAndSharedRunAgreeAndResumeExactly) {
  const std::string base =
      "--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --workers 2 --steps 30 --json "
      "--compressor sidco-e --ratio 0.01 --momentum-correction";
  for (const std::string mode :
       {" --compress-when auto --compress-when-interval 3", " --exchange shared", " --exchange sparse-allreduce"}) {
    TempDir d;
    const fs::path root = d.path() / "ckpt";
    const auto full = json_of(gradscope(base + mode + " --checkpoint " + root.string() + " --checkpoint-every 22"));
    EXPECT_EQ(full["replica_max_diff"].get<double>(), 0.0) << mode;
    std::vector<bool> dense;
    for (const auto& s : full["per_step"]) dense.push_back(s["dense"].get<bool>());
    if (mode.find("auto") != std::string::npos) {
      EXPECT_FALSE(dense[0]);  // both modes timed first
      EXPECT_TRUE(dense[1]);
    } else {
      EXPECT_EQ(std::count(dense.begin(), dense.end(), true), 0);
    }
    const auto resumed = json_of(gradscope(base + mode + " --resume " + step_dir(root, 22).string()));
    if (mode.find("auto") == std::string::npos) {  // a timed choice may differ in another process
      EXPECT_EQ(resumed["param_digest"], full["param_digest"]) << mode;
      EXPECT_EQ(losses(resumed), losses(full)) << mode;
    } else {
      EXPECT_EQ(resumed["resumed_from_step"].get<int>(), 22);
      EXPECT_EQ(resumed["replica_max_diff"].get<double>(), 0.0);
    }
  }
  // The sparse all-reduce over Gloo's all-to-all at an odd number of workers: the replicas agree.
  const auto three =
      json_of(gradscope("--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --workers 3 --steps 6 "
                        "--json --compressor topk --ratio 0.01 --exchange sparse-allreduce"));
  EXPECT_EQ(three["replica_max_diff"].get<double>(), 0.0);
  for (const auto& s : three["per_step"]) EXPECT_EQ(s["exchange"], "sparse-allreduce");
  // --exchange auto at 8 workers: the sparse all-reduce, each step says so (below 7 at this density
  // the all-gather: ExchangeAuto.* and the hook's test at 3 ranks).
  const auto eight =
      json_of(gradscope("--model mlp --batch 32 --seed 4 --lr 0.05 --quiet --steps 3 --json "
                        "--compressor topk --ratio 0.01 --exchange auto --workers 8"));
  EXPECT_EQ(eight["replica_max_diff"].get<double>(), 0.0);
  for (const auto& s : eight["per_step"]) EXPECT_EQ(s["exchange"], "sparse-allreduce");
  EXPECT_NE(one_line(gradscope("--steps 2 --compress-when-interval 7")).find("--compress-when-interval does nothing"),
            std::string::npos);
  EXPECT_NE(one_line(gradscope("--steps 2 --workers 2 --compressor qsgd-mn --ratio 1 --exchange shared"))
                .find("sends no sparse selection"),
            std::string::npos);
}

}  // namespace
