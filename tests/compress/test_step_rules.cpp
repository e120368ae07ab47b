// The step rules' own guards (gs/compress/step_rules.hpp): a density schedule that is off keeps no
// state whatever the run's length, and resumes from any step (a checkpoint after step 425 of a run
// without a schedule once failed to load); the density watch warns on a drift over its window,
// once; settings that would do nothing are refused; a step at density 1 goes dense.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/step_rules.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

DensitySchedule accordion(std::int64_t interval) {
  DensitySchedule s;
  s.kind = DensitySchedule::Kind::accordion;
  s.interval = interval;
  return s;
}

std::string saved(const RegimeDetector& d) {
  gs::StateWriter w;
  d.save_state(w);
  return w.take();
}

// Runs the detector as a trainer does for `steps` steps.
void run(RegimeDetector& d, std::int64_t steps) {
  for (std::int64_t step = 0; step < steps; ++step) {
    d.add(false, 1.0 + 0.1 * double(step % 3));
    if (d.due(step)) d.decide(d.interval_sum());
  }
}

const WarmupSchedule::Names kWarmupNames = {"warmup_steps", "warmup", "warmup_start_ratio", "ratio"};
const DensitySchedule::Names kScheduleNames = {"density_schedule", "density_high", "density_interval", "density_eta",
                                               "ratio"};

}  // namespace

TEST(RegimeDetector, OffItKeepsNothingAndResumesFromAnyStep) {
  for (std::int64_t steps : {0, 19, 20, 21, 425, 5000}) {
    RegimeDetector off;
    run(off, steps);
    EXPECT_EQ(off.interval_sum(), 0.0) << steps;
    RegimeDetector fresh;
    const std::string state = saved(off);
    gs::StateReader r(state, "state");
    EXPECT_NO_THROW(fresh.load_state(r)) << steps;
    EXPECT_TRUE(r.at_end());
    EXPECT_EQ(saved(fresh), saved(RegimeDetector{})) << steps;
  }
}

TEST(RegimeDetector, OnItResumesPastItsIntervals) {
  for (std::int64_t steps : {7, 20, 26, 425}) {
    RegimeDetector on(accordion(7));
    run(on, steps);
    RegimeDetector fresh(accordion(7));
    const std::string state = saved(on);
    gs::StateReader r(state, "state");
    ASSERT_NO_THROW(fresh.load_state(r)) << steps;
    EXPECT_EQ(saved(fresh), saved(on)) << steps;
  }
}

// A state saved by a detector that counted steps while off (as earlier versions did) still loads:
// its counts are read past. A count at or past the interval of a schedule that is on is refused.
TEST(RegimeDetector, StatesThatCountedStepsOffStillLoad) {
  gs::StateWriter w;
  w.put_text("constant");
  w.put(0.1);
  w.put(std::int64_t{20});
  w.put(0.5);
  w.put(0.0);                // the sum (0: nothing added off)
  w.put(std::int64_t{425});  // the steps it counted
  w.put(-1.0);
  w.put<std::uint8_t>(1);
  RegimeDetector off;
  gs::StateReader r(w.bytes(), "state");
  EXPECT_NO_THROW(off.load_state(r));
  EXPECT_EQ(saved(off), saved(RegimeDetector{}));

  RegimeDetector on(accordion(20));
  gs::StateWriter w2;
  w2.put_text("accordion");
  w2.put(0.1);
  w2.put(std::int64_t{20});
  w2.put(0.5);
  w2.put(3.0);
  w2.put(std::int64_t{20});  // a whole interval counted, yet undecided: impossible
  w2.put(-1.0);
  w2.put<std::uint8_t>(1);
  gs::StateReader r2(w2.bytes(), "state");
  EXPECT_NE(error_message([&] { on.load_state(r2); }).find("inconsistent"), std::string::npos);
}

TEST(DensityWatch, WarnsOnADriftOverItsWindowOnce) {
  // Steady near the target, with noise: never.
  DensityWatch steady;
  for (int i = 0; i < 500; ++i) EXPECT_EQ(steady.add(1.0 + 0.4 * std::sin(i)), "") << i;
  // GaussianKSGD-like: about a quarter of the target on average, most steps below half but runs
  // of at most 29: at the 50th compressed step, once.
  DensityWatch low;
  int warnings = 0, at = -1;
  for (int i = 0; i < 200; ++i) {
    const double q = (i % 30 == 29) ? 1.1 : 0.2;
    const std::string w = low.add(q);
    if (!w.empty()) {
      ++warnings;
      at = i;
      EXPECT_NE(w.find("averaged 0.218x the target"), std::string::npos) << w;
    }
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(at, DensityWatch::kWindow - 1);
  // RedSync-like swings between 0.07x and 6.3x: the mean is 3.2x.
  DensityWatch swinging;
  warnings = 0;
  for (int i = 0; i < 200; ++i) warnings += !swinging.add(i % 2 ? 6.3 : 0.07).empty();
  EXPECT_EQ(warnings, 1);
  // A cycle whose mean stays in the band but that spends most steps outside it.
  DensityWatch cycling;
  warnings = 0;
  for (int i = 0; i < 200; ++i) warnings += !cycling.add(i % 10 < 6 ? 0.3 : 1.6).empty();
  EXPECT_EQ(warnings, 1);
  // A run that drifts late is caught late.
  DensityWatch late;
  int first = -1;
  for (int i = 0; i < 400 && first < 0; ++i)
    if (!late.add(i < 300 ? 1.0 : 0.3).empty()) first = i;
  EXPECT_GT(first, 300);
  EXPECT_LT(first, 300 + DensityWatch::kWindow);
}

TEST(StepRules, SettingsThatWouldDoNothingAreRefused) {
  WarmupSchedule w;
  w.density = 0.01;
  w.kind = WarmupSchedule::Kind::exponential;  // without steps
  EXPECT_NE(error_message([&] {
              w.check(true, "sidco-e", kWarmupNames);
            }).find("warmup exponential does nothing without warmup_steps"),
            std::string::npos);
  WarmupSchedule start;
  start.density = 0.01;
  start.start_density = 0.5;  // dense warm-up (the default kind)
  start.steps = 10;
  EXPECT_NE(error_message([&] {
              start.check(true, "sidco-e", kWarmupNames);
            }).find("warmup_start_ratio 0.5 does nothing without warmup exponential"),
            std::string::npos);
  start.kind = WarmupSchedule::Kind::exponential;
  EXPECT_NO_THROW(start.check(true, "sidco-e", kWarmupNames));

  for (auto set : {+[](DensitySchedule& s) { s.high = 0.2; }, +[](DensitySchedule& s) { s.interval = 7; },
                   +[](DensitySchedule& s) { s.eta = 0.3; }}) {
    DensitySchedule s;  // constant
    set(s);
    const std::string e = error_message([&] { s.check(true, "sidco-e", 0.01, kScheduleNames); });
    EXPECT_NE(e.find("does nothing with the constant schedule"), std::string::npos) << e;
  }
  EXPECT_NE(error_message([&] {
              DensitySchedule s;
              s.high = 0.2;
              s.check(true, "sidco-e", 0.01, kScheduleNames);
            }).find("density_high is a setting of density_schedule accordion"),
            std::string::npos);
  EXPECT_NO_THROW(DensitySchedule{}.check(true, "sidco-e", 0.01, kScheduleNames));
}

TEST(StepRules, AStepAtDensityOneGoesDense) {
  WarmupSchedule w;
  w.steps = 3;
  w.density = 0.01;
  EXPECT_TRUE(sends_dense(w, 0, 0.01, true));  // the warm-up
  EXPECT_FALSE(sends_dense(w, 3, 0.01, true));
  EXPECT_TRUE(sends_dense(w, 3, 1.0, true));    // ratio 1 of a sparsifier: dense
  EXPECT_FALSE(sends_dense(w, 3, 1.0, false));  // a quantizer at its nominal 1: its own codes
}
