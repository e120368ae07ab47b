// Accordion's density schedule (gs/compress/step_rules.hpp): the regime detector on a scripted
// norm sequence, its settings' checks, the density it gives with and after a warm-up, and in
// BucketCompressor (the DDP hook's step): every worker takes the same decisions, on the host
// path and the device path, and a checkpoint continues exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

DensitySchedule accordion(std::int64_t interval, double high = 0.1, double eta = 0.5) {
  DensitySchedule s;
  s.kind = DensitySchedule::Kind::accordion;
  s.high = high;
  s.interval = interval;
  s.eta = eta;
  return s;
}

const DensitySchedule::Names kNames = {"--density-schedule", "--density-high", "--density-interval", "--density-eta",
                                       "--ratio"};

// Feeds the detector one interval of steps whose gradient norm is `norm` (squared norms summed
// over one worker), then takes the check step's decision; returns the regime after it.
bool interval_of(RegimeDetector& d, std::int64_t& step, double norm, std::int64_t interval) {
  for (std::int64_t i = 0; i < interval; ++i, ++step) {
    d.add(false, norm * norm);
    EXPECT_EQ(d.due(step), i + 1 == interval) << "step " << step;
    if (d.due(step)) d.decide(d.interval_sum());
  }
  return d.critical();
}

}  // namespace

// The rule on a scripted sequence of norms (one interval each): the first check has nothing to
// compare with and keeps the start's critical regime; then |n - n_prev| / n_prev >= eta is critical.
TEST(RegimeDetector, DecidesOnTheRelativeChangeOfTheNorm) {
  RegimeDetector d(accordion(3));
  EXPECT_TRUE(d.critical()) << "a run starts critical";
  std::int64_t step = 0;
  const std::vector<std::pair<double, bool>> script = {
      {1.0, true},    // no norm before: stays critical
      {0.9, false},   // -10%
      {0.5, false},   // -44%: below eta 0.5
      {0.25, true},   // -50%: eta itself counts
      {0.3, false},   // +20%
      {0.6, true},    // +100%
      {0.0, true},    // -100%
      {0.001, true},  // from a norm of 0: a change, whatever its size (Accordion's code)
      {0.001, false},
  };
  for (const auto& [norm, critical] : script)
    EXPECT_EQ(interval_of(d, step, norm, 3), critical) << "norm " << norm << " at step " << step;
  EXPECT_DOUBLE_EQ(d.last_norm(), 0.001);
}

// The interval's norm is the root mean square over its counted steps: skipped steps count
// nothing; an interval of skipped steps only keeps the regime and the norm compared with.
TEST(RegimeDetector, SkippedStepsCountNothing) {
  RegimeDetector d(accordion(4));
  for (int s = 0; s < 4; ++s) d.add(false, 4.0);  // norm 2
  d.decide(d.interval_sum());
  // 3 steps of norm 2 and a skipped one (its NaN never reaches the sum): still norm 2
  for (int s = 0; s < 3; ++s) d.add(false, 4.0);
  d.add(true, std::nan(""));
  d.decide(d.interval_sum());
  EXPECT_FALSE(d.critical());
  EXPECT_DOUBLE_EQ(d.last_norm(), 2.0);
  for (int s = 0; s < 4; ++s) d.add(true, 0.0);
  d.decide(d.interval_sum());
  EXPECT_FALSE(d.critical());
  EXPECT_DOUBLE_EQ(d.last_norm(), 2.0);
  // A non-finite sum (overflow) decides nothing either.
  for (int s = 0; s < 4; ++s) d.add(false, 1.0);
  d.decide(INFINITY);
  EXPECT_FALSE(d.critical());
  EXPECT_DOUBLE_EQ(d.last_norm(), 2.0);
}

// The warm-up keeps its densities; after it, high in a critical regime and the run's otherwise.
TEST(RegimeDetector, TakesOverAfterTheWarmup) {
  WarmupSchedule w;
  w.steps = 4;
  w.kind = WarmupSchedule::Kind::exponential;
  w.start_density = 0.25;
  w.density = 0.01;
  RegimeDetector off;
  EXPECT_FALSE(off.moves_density(WarmupSchedule{}));
  EXPECT_DOUBLE_EQ(off.density_at(w, 7), 0.01);
  RegimeDetector d(accordion(2, 0.1));
  EXPECT_TRUE(d.moves_density(WarmupSchedule{}));
  for (std::int64_t s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(d.density_at(w, s), w.density_at(s)) << s;
    EXPECT_FALSE(d.critical_at(w, s)) << s;
  }
  EXPECT_DOUBLE_EQ(d.density_at(w, 4), 0.1);
  EXPECT_TRUE(d.critical_at(w, 4));
  std::int64_t step = 0;
  interval_of(d, step, 1.0, 2);
  interval_of(d, step, 1.0, 2);
  EXPECT_DOUBLE_EQ(d.density_at(w, 4), 0.01);
  EXPECT_FALSE(d.critical_at(w, 4));
  WarmupSchedule dense = w;
  dense.kind = WarmupSchedule::Kind::dense;
  EXPECT_DOUBLE_EQ(d.density_at(dense, 3), 1.0) << "a dense warm-up step stays uncompressed";
}

TEST(DensitySchedule, BadSettingsAreRefusedInTheCallersWords) {
  EXPECT_NO_THROW(DensitySchedule{}.check(false, "none", 1.0, kNames)) << "constant: nothing to check";
  EXPECT_NO_THROW(accordion(20).check(true, "sidco-e", 0.01, kNames));
  auto msg = [](const DensitySchedule& s, bool density_based = true) {
    return error_message([&] { s.check(density_based, "sidco-e", 0.01, kNames); });
  };
  EXPECT_NE(msg(accordion(20, 0.01)).find("--density-high 0.01 must lie above --ratio (0.01)"), std::string::npos)
      << msg(accordion(20, 0.01));
  EXPECT_NE(msg(accordion(20, 1.5)).find("at most 1"), std::string::npos);
  EXPECT_NE(msg(accordion(0)).find("--density-interval must be at least 1"), std::string::npos);
  EXPECT_NE(msg(accordion(20, 0.1, 0.0)).find("--density-eta must be a positive number"), std::string::npos);
  EXPECT_NE(msg(accordion(20), false).find("has no density"), std::string::npos);
  EXPECT_THROW(DensitySchedule::parse_kind("adaptive"), gs::Error);
  EXPECT_EQ(DensitySchedule::to_string(DensitySchedule::parse_kind("accordion")), "accordion");
}

TEST(RegimeDetector, StateRoundTripsAndRefusesAnotherSchedule) {
  RegimeDetector d(accordion(3));
  std::int64_t step = 0;
  interval_of(d, step, 1.0, 3);
  interval_of(d, step, 1.0, 3);
  d.add(false, 9.0);  // mid-interval
  gs::StateWriter w;
  d.save_state(w);
  RegimeDetector back(accordion(3));
  gs::StateReader r(w.bytes(), "test");
  back.load_state(r);
  EXPECT_TRUE(r.at_end());
  EXPECT_EQ(back.critical(), d.critical());
  EXPECT_EQ(back.interval_sum(), d.interval_sum());
  EXPECT_EQ(back.last_norm(), d.last_norm());
  RegimeDetector other(accordion(4));
  gs::StateReader r2(w.bytes(), "test");
  EXPECT_NE(error_message([&] { other.load_state(r2); }).find("interval"), std::string::npos);
}

namespace {

// The scale of step s's gradients: steady, then four times larger from step 10 on.
float scale_at(int s) { return s < 10 ? 1.0f : 4.0f; }

// W workers exchange `steps` steps of two buckets with the schedule (interval 5, topk at 0.01,
// 0.1 when critical); each worker's gradients have their own size (rank + 1). Returns each
// worker's per-step (critical, target density) and updates.
struct ScheduleRun {
  std::vector<std::vector<std::pair<bool, double>>> regimes;
  std::vector<std::vector<std::vector<float>>> updates;
};

ScheduleRun run_schedule(int workers, int steps, bool device) {
  ScheduleRun out;
  out.regimes.resize(std::size_t(workers));
  out.updates.resize(std::size_t(workers));
  const std::vector<std::vector<BucketParam>> buckets = {{{1, 3000}, {2, 2000}}, {{3, 770}}};
  run_workers(workers, [&](Collectives& comm) {
    const auto r = std::size_t(comm.rank());
    auto bc = gs::testing::make_bucket("topk", 0.01, comm.rank(), {}, device ? "cuda-host" : "cpu");
    bc->set_density_schedule(accordion(5), kNames);
    const int dev = comm.rank() + 1;
    for (int s = 0; s < steps; ++s) {
      std::vector<float> step_out;
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        const std::uint64_t n = b == 0 ? 5000 : 770;
        auto g = gs::testing::grad(n, 100 * std::uint64_t(s) + 10 * b + r);
        for (float& v : g) v *= scale_at(s) * float(r + 1);
        std::vector<float> o(n);
        if (device) {
          const gs::kernels::cuda_host::DeviceMemory on(g.data(), g.size() * sizeof(float), dev);
          const gs::kernels::CallerStream caller(dev, gs::kernels::cuda_host::caller_stream(dev));
          bc->exchange_resident({int(b), g.data(), n, gs::kernels::BackendKind::cuda_host, dev}, buckets[b], comm,
                                nullptr, b == 1);
          o = g;
        } else {
          bc->exchange(int(b), g, buckets[b], comm, o, b == 1);
        }
        step_out.insert(step_out.end(), o.begin(), o.end());
      }
      out.updates[r].push_back(std::move(step_out));
      const StepStats& st = bc->history().back();
      out.regimes[r].emplace_back(st.critical, st.target_density);
    }
    EXPECT_EQ(bc->summary().critical_steps, 15);
  });
  return out;
}

}  // namespace

// Every worker sees different norms (its gradients have its own size) and takes the same
// decisions: the sum over the workers is all-reduced at each check. Start critical; at step 9 the
// norm has not moved (compressed hard from step 10); the jump at step 10 is seen at step 14
// (critical for steps 15-19); at step 19 the norm has settled again.
TEST(BucketDensitySchedule, EveryWorkerTakesTheSameDecisions) {
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "cuda-host buckets" : "host buckets");
    const ScheduleRun run = run_schedule(3, 25, device);
    for (int s = 0; s < 25; ++s) {
      const bool critical = s < 10 || (s >= 15 && s < 20);
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(run.regimes[r][s].first, critical) << "worker " << r << " step " << s;
        EXPECT_DOUBLE_EQ(run.regimes[r][s].second, critical ? 0.1 : 0.01) << "worker " << r << " step " << s;
        EXPECT_EQ(run.updates[r][s], run.updates[0][s]) << "worker " << r << " step " << s;
      }
    }
  }
}

// A checkpoint mid-interval (the detector's sum so far, the norm compared with, the regime)
// continues exactly: the same updates and decisions as the run that did not stop.
TEST(BucketDensitySchedule, ACheckpointContinuesExactly) {
  SoloCollectives solo;
  const std::vector<BucketParam> all = {{1, 3000}, {2, 2000}};
  auto make = [] {
    auto bc = gs::testing::make_bucket("sidco-e", 0.01, 0);
    bc->set_density_schedule(accordion(4, 0.2, 0.3), kNames);
    return bc;
  };
  auto step = [&](BucketCompressor& bc, int s) {
    auto g = gs::testing::grad(5000, 7 + std::uint64_t(s));
    for (float& v : g) v *= scale_at(s / 2 + 3);  // a jump at step 14
    std::vector<float> o(5000);
    bc.exchange(0, g, all, solo, o, true);
    return std::make_pair(o, bc.history().back().critical);
  };
  auto a = make();
  for (int s = 0; s < 10; ++s) step(*a, s);
  gs::StateWriter w;
  a->save_state(w);
  auto b = make();
  gs::StateReader r(w.bytes(), "test");
  b->load_state(r);
  int critical = 0;
  for (int s = 10; s < 24; ++s) {
    const auto x = step(*a, s);
    EXPECT_EQ(x, step(*b, s)) << "step " << s;
    critical += x.second;
  }
  EXPECT_GT(critical, 0);
  EXPECT_LT(critical, 14);
  // Another schedule's state is refused, naming the setting.
  auto c = gs::testing::make_bucket("sidco-e", 0.01, 0);
  gs::StateReader r2(w.bytes(), "test");
  EXPECT_NE(error_message([&] { c->load_state(r2); }).find("density schedule"), std::string::npos);
}
