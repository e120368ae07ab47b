// A checkpoint of the DDP hook's core (BucketCompressor) taken past every window its state carries
// continues to the bit: SIDCo's stage controller (5-step windows), Accordion's interval (7 steps:
// three checks before the save), a 5-step warm-up, momentum correction's velocities, the skip
// count and the statistics. Every compressor, with the density schedule off and on and momentum
// correction off and on where they apply, on two workers; the state is saved after step 26 and
// loaded into fresh cores, which then run the same 8 steps as the saved ones. (A run without a
// schedule once could not resume past step 20.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bucket_test_util.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"

using namespace gs::compress;

namespace {

constexpr int kSaveAfter = 26, kThen = 8;

struct Variant {
  std::string method;
  bool accordion = false;
  double momentum = 0.0;
};

std::string name_of(const Variant& v) {
  return v.method + (v.accordion ? " +accordion" : "") + (v.momentum > 0 ? " +momentum correction" : "");
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (auto name : compressor_names()) {
    const std::string method(name);
    const bool sparse_ef = supports_momentum_correction(*make_compressor(method, density_based(method) ? 0.01 : 1.0));
    for (bool accordion : {false, true})
      for (bool momentum : {false, true}) {
        if ((accordion && !density_based(method)) || (momentum && !sparse_ef)) continue;
        v.push_back({method, accordion, momentum ? 0.9 : 0.0});
      }
  }
  return v;
}

std::unique_ptr<BucketCompressor> make(const Variant& v, int rank) {
  WarmupSchedule w;
  w.steps = 5;
  auto c = gs::testing::make_bucket(v.method, density_based(v.method) ? 0.01 : 1.0, rank, w);
  if (v.accordion) {
    DensitySchedule s;
    s.kind = DensitySchedule::Kind::accordion;
    s.interval = 7;
    s.eta = 0.05;  // small: the regime changes during the run
    c->set_density_schedule(s, {"kind", "high", "interval", "eta", "ratio"});
  }
  if (v.momentum > 0) c->set_momentum_correction(v.momentum, "momentum");
  return c;
}

// One step of two buckets; the updates, laid end to end.
std::vector<float> step(BucketCompressor& c, Collectives& comm, int s) {
  const BucketParam p0[] = {{11, 2000}, {12, 1000}}, p1[] = {{13, 500}};
  const std::uint64_t seed = 1000 * std::uint64_t(s) + std::uint64_t(comm.rank());
  auto g0 = gs::testing::grad(3000, seed), g1 = gs::testing::grad(500, seed + 500);
  for (auto& x : g0) x *= 1.0f + 0.1f * float(s % 4);  // norms that move: Accordion's checks decide
  std::vector<float> out(3500);
  const bool variance = c.compressor().needs_gradient_variance();
  std::vector<float> v0, v1;
  if (variance) {
    for (float x : g0) v0.push_back(4.0f * x * x);
    for (float x : g1) v1.push_back(4.0f * x * x);
  }
  c.exchange(0, g0, p0, comm, std::span<float>(out).first(3000), false, v0);
  c.exchange(1, g1, p1, comm, std::span<float>(out).subspan(3000), true, v1);
  return out;
}

}  // namespace

TEST(ResumePastEveryWindow, EveryCompressorScheduleAndMomentumCorrectionContinuesToTheBit) {
  const auto all = variants();
  ASSERT_GT(all.size(), 20u);
  for (const Variant& v : all) {
    run_workers(2, [&](Collectives& comm) {
      auto original = make(v, comm.rank());
      for (int s = 0; s < kSaveAfter; ++s) step(*original, comm, s);
      gs::StateWriter w;
      original->save_state(w);
      const std::string saved = w.take();
      std::vector<std::vector<float>> expected;
      for (int s = kSaveAfter; s < kSaveAfter + kThen; ++s) expected.push_back(step(*original, comm, s));

      auto resumed = make(v, comm.rank());
      gs::StateReader r(saved, "state");
      resumed->load_state(r);
      for (int s = kSaveAfter; s < kSaveAfter + kThen; ++s)
        ASSERT_EQ(step(*resumed, comm, s), expected[std::size_t(s - kSaveAfter)])
            << name_of(v) << ", worker " << comm.rank() << ", step " << s;
      EXPECT_EQ(resumed->steps(), original->steps());
      EXPECT_EQ(resumed->summary().critical_steps, original->summary().critical_steps) << name_of(v);
      EXPECT_EQ(resumed->summary().quality_mean, original->summary().quality_mean) << name_of(v);
      if (v.accordion && comm.rank() == 0) {
        EXPECT_GT(original->summary().critical_steps, 0) << name_of(v) << ": the schedule never ran critical";
      }
    });
  }
}
