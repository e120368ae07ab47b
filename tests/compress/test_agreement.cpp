// Workers must agree on their settings (gs/compress/agreement.hpp): a difference stops every
// worker with the same line, naming the setting and both values, before any collective could
// mismatch. In the DDP hook's core (BucketCompressor) the comparison runs at the first bucket and
// again after a load; the cases below are those that once trained silently on other rules (another
// ratio, method or momentum correction) or hung until a timeout (a warm-up, Accordion or a
// quantizer on one worker only).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/compress/agreement.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

// What each of `workers` threads raised ("(no error)": nothing), in rank order.
std::vector<std::string> errors_of(int workers, const std::function<void(Collectives&)>& fn) {
  std::vector<std::string> errors(static_cast<std::size_t>(workers));
  run_workers(
      workers, [&](Collectives& comm) { errors[std::size_t(comm.rank())] = error_message([&] { fn(comm); }); },
      std::chrono::milliseconds(20000));
  return errors;
}

struct Settings {
  std::string method = "sidco-e";
  double ratio = 0.01;
  WarmupSchedule warmup{};
  bool accordion = false;
  double momentum = 0.0;
};

// A hook core made as a front end makes it, with the settings it names.
std::unique_ptr<BucketCompressor> core(const Settings& s, int rank) {
  auto c = gs::testing::make_bucket(s.method, density_based(s.method) ? s.ratio : 1.0, rank, s.warmup);
  if (s.accordion) {
    DensitySchedule d;
    d.kind = DensitySchedule::Kind::accordion;
    c->set_density_schedule(d, {"density_schedule", "density_high", "density_interval", "density_eta", "ratio"});
  }
  if (s.momentum > 0) c->set_momentum_correction(s.momentum, "momentum_correction");
  std::ostringstream ratio;
  ratio << s.ratio;
  c->set_shared_settings({{"method", s.method},
                          {"ratio", ratio.str()},
                          {"warmup_steps", std::to_string(s.warmup.steps)},
                          {"density_schedule", s.accordion ? "accordion" : "constant"},
                          {"momentum_correction", std::to_string(s.momentum)}},
                         "make every rank's State with the same settings");
  return c;
}

// Two workers each run `steps` steps of two buckets with their own settings; what each raised.
std::vector<std::string> run_pair(const Settings& a, const Settings& b, int steps = 3) {
  return errors_of(2, [&](Collectives& comm) {
    auto c = core(comm.rank() == 0 ? a : b, comm.rank());
    const BucketParam p0[] = {{1, 3000}}, p1[] = {{2, 500}};
    for (int step = 0; step < steps; ++step) {
      const auto g0 = gs::testing::grad(3000, 10 * step + comm.rank()), g1 = gs::testing::grad(500, 7 * step);
      std::vector<float> o0(3000), o1(500);
      c->exchange(0, g0, p0, comm, o0, false);
      c->exchange(1, g1, p1, comm, o1, true);
    }
  });
}

}  // namespace

TEST(Agreement, EqualSettingsPassAndADifferenceStopsEveryWorkerWithTheSameLine) {
  const std::vector<Setting> mine = {{"method", "sidco-e"}, {"ratio", "0.01"}};
  for (const auto& e : errors_of(3, [&](Collectives& comm) { agree_settings(comm, mine, "fix it"); }))
    EXPECT_EQ(e, "(no error)");
  const auto errors = errors_of(3, [&](Collectives& comm) {
    std::vector<Setting> s = mine;
    if (comm.rank() == 2) s[1].value = "0.02";
    agree_settings(comm, s, "fix it");
  });
  for (const auto& e : errors)
    EXPECT_EQ(e, "the workers' settings differ: ratio is 0.02 on worker 2 and 0.01 on worker 0; fix it");
  // A setting one worker lacks.
  const auto missing = errors_of(2, [&](Collectives& comm) {
    std::vector<Setting> s = mine;
    if (comm.rank() == 1) s.push_back({"bits", "4"});
    agree_settings(comm, s, "fix it");
  });
  EXPECT_NE(missing[0].find("bits is 4 on worker 1 and not set on worker 0"), std::string::npos) << missing[0];
}

TEST(Agreement, TheHookCoreRefusesWhatOnceTrainedSilently) {
  Settings base;
  Settings ratio = base;
  ratio.ratio = 0.02;
  Settings method = base;
  method.method = "topk";
  Settings momentum = base;
  momentum.momentum = 0.9;
  const std::vector<std::pair<Settings, std::string>> cases = {
      {ratio, "ratio is 0.02 on worker 1 and 0.01 on worker 0"},
      {method, "method is topk on worker 1 and sidco-e on worker 0"},
      {momentum, "momentum_correction is 0.900000 on worker 1 and 0.000000 on worker 0"}};
  for (const auto& [other, text] : cases)
    for (const auto& e : run_pair(base, other)) EXPECT_NE(e.find(text), std::string::npos) << e;
}

// These called other collectives than their peer and hung until the group's timeout (30 minutes
// by default): now both workers stop at the first bucket, before any of them.
TEST(Agreement, TheHookCoreRefusesWhatOnceHung) {
  Settings base;
  Settings warmup = base;
  warmup.warmup.steps = 5;
  Settings accordion = base;
  accordion.accordion = true;
  Settings quantizer = base;
  quantizer.method = "qsgd-mn";
  const std::vector<std::pair<Settings, std::string>> cases = {
      {warmup, "warmup_steps is 5 on worker 1 and 0 on worker 0"},
      {accordion, "density_schedule is accordion on worker 1 and constant on worker 0"},
      {quantizer, "method is qsgd-mn on worker 1 and sidco-e on worker 0"}};
  for (const auto& [other, text] : cases)
    for (const auto& e : run_pair(base, other)) EXPECT_NE(e.find(text), std::string::npos) << e;
}

// After a load, the workers compare again: one that loaded another step's state stops them all.
TEST(Agreement, WorkersThatLoadedDifferentStepsAreStopped) {
  const auto errors = errors_of(2, [&](Collectives& comm) {
    Settings s;
    auto c = core(s, comm.rank());
    const BucketParam p0[] = {{1, 3000}};
    std::string saved;
    for (int step = 0; step < 4; ++step) {
      const auto g = gs::testing::grad(3000, step + 10 * comm.rank());
      std::vector<float> o(3000);
      c->exchange(0, g, p0, comm, o, true);
      if (step == comm.rank()) {  // worker 0 saves after 1 step, worker 1 after 2
        gs::StateWriter w;
        c->save_state(w);
        saved = w.take();
      }
    }
    gs::StateReader r(saved, "state");
    c->load_state(r);
    const auto g = gs::testing::grad(3000, 99);
    std::vector<float> o(3000);
    c->exchange(0, g, p0, comm, o, true);
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("the state's finished steps is 2 on worker 1 and 1 on worker 0"), std::string::npos) << e;
}

// A front end's refusal (Python's momentum correction beside an optimizer's momentum) comes after
// the agreement, on every worker alike.
TEST(Agreement, ARefusalStopsEveryWorkerAlike) {
  const auto errors = errors_of(2, [&](Collectives& comm) {
    auto c = core(Settings{}, comm.rank());
    c->refuse_steps("refused: the optimizer keeps a momentum");
    const BucketParam p0[] = {{1, 100}};
    const auto g = gs::testing::grad(100, 1);
    std::vector<float> o(100);
    c->exchange(0, g, p0, comm, o, true);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "refused: the optimizer keeps a momentum");
}
