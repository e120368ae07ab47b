// SIDCo's own estimate on the momentum-corrected accumulator (docs/algorithms.md, "SIDCo's estimate
// on the momentum-corrected accumulator"): the fit alone misses the target on nearly every step
// there and the count correction ends on exact top-k; the carried estimate (the fit times the
// calibration the last count of the same bucket gave) holds it, and a checkpoint carries it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "bucket_test_util.hpp"

using namespace gs::compress;

namespace {

constexpr int kWorkers = 2;
// Two buckets of parameters {1: 30000, 2: 10000} and {3: 24000}.
const std::vector<std::vector<BucketParam>> kBuckets = {{{1, 30000}, {2, 10000}}, {{3, 24000}}};

// A training-like gradient: a drift per element that persists from step to step (Laplace, its
// scale per parameter, as layers differ), and noise around it that changes every step. Momentum
// correction accumulates the drift of every element not sent, which is what shapes the
// accumulator's tail.
std::vector<float> gradient(std::uint64_t key, std::uint64_t numel, int rank, int step) {
  std::mt19937_64 fixed(1000 + key);
  std::exponential_distribution<float> e(1.0f);
  std::bernoulli_distribution sign(0.5);
  std::mt19937_64 noisy(std::uint64_t(step) * 7919 + std::uint64_t(rank) * 104729 + key);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const float scale = 0.001f * float(key);
  std::vector<float> g(numel);
  for (auto& v : g) {
    const float drift = (sign(fixed) ? 1.0f : -1.0f) * e(fixed) * scale;
    v = drift + 2.0f * scale * noise(noisy);
  }
  return g;
}

struct Trained {
  std::vector<std::vector<float>> updates;  // per step, the buckets laid end to end (rank 0)
  RunSummary summary;
  std::vector<StepStats> steps;
};

std::unique_ptr<BucketCompressor> make(const std::string& estimate, int rank) {
  CompressorOptions o = gs::testing::seeded(rank);
  o.sidco_estimate = estimate;
  auto bc = std::make_unique<BucketCompressor>(make_compressor("sidco-e", 0.01, o), WarmupSchedule{});
  bc->set_momentum_correction(0.9, "momentum_correction");
  return bc;
}

// `steps` steps of every worker; with resume_at >= 0 each worker's state goes through a
// checkpoint after that many steps into a fresh compressor, which goes on.
Trained train(const std::string& estimate, int steps, int resume_at = -1) {
  Trained run;
  run_workers(kWorkers, [&](Collectives& comm) {
    auto bc = make(estimate, comm.rank());
    std::vector<std::vector<float>> updates;
    for (int s = 0; s < steps; ++s) {
      if (s == resume_at) {
        gs::StateWriter w;
        bc->save_state(w);
        bc = make(estimate, comm.rank());
        gs::StateReader r(w.bytes(), "the checkpoint");
        bc->load_state(r);
      }
      std::vector<float> step;
      for (std::size_t b = 0; b < kBuckets.size(); ++b) {
        std::vector<float> g;
        for (const BucketParam& p : kBuckets[b]) {
          const auto part = gradient(p.key, p.numel, comm.rank(), s);
          g.insert(g.end(), part.begin(), part.end());
        }
        std::vector<float> out(g.size());
        bc->exchange(int(b), g, kBuckets[b], comm, out, b + 1 == kBuckets.size());
        step.insert(step.end(), out.begin(), out.end());
      }
      updates.push_back(std::move(step));
    }
    if (comm.rank() == 0) {
      run.updates = std::move(updates);
      run.summary = bc->summary();
      run.steps.assign(bc->history().begin(), bc->history().end());
    }
  });
  return run;
}

}  // namespace

// Goal (issue: SIDCo that earns its place in training): under momentum correction SIDCo-E's own
// estimate lies within [0.8, 1.25] on at least 80% of the compressed steps, the correction runs on
// at most 20% of the buckets and an exact top-k ends at most 5% of them, with the density goals
// kept. The fit alone misses all three on the same run.
TEST(SidcoEstimate, CarriedHoldsTheMomentumCorrectedAccumulatorWhereTheFitMisses) {
  constexpr int kSteps = 60;
  const Trained carried = train("carried", kSteps);
  const RunSummary& c = carried.summary;
  EXPECT_GE(c.estimate_in_band, 0.8);
  EXPECT_LE(c.corrected_share, 0.2);
  EXPECT_LE(c.exact_share, 0.05);
  EXPECT_GE(c.density_mean, 0.8 * 0.01);
  EXPECT_LE(c.density_mean, 1.25 * 0.01);
  int in_band = 0;
  for (const StepStats& s : carried.steps) in_band += s.quality() >= 0.5 && s.quality() <= 2.0;
  EXPECT_GE(in_band, int(0.9 * kSteps));

  const Trained fit = train("fit", kSteps);
  EXPECT_LT(fit.summary.estimate_in_band, 0.8) << "the fit alone should miss on this accumulator";
  EXPECT_GT(fit.summary.corrected_share, 0.2);
  // Every step still holds its density: the correction does it, at an exact top-k's cost.
  EXPECT_GE(fit.summary.density_mean, 0.8 * 0.01);
}

// A checkpoint after any step, those right after a re-estimation (a corrected bucket whose count
// re-based the carried factor) included, continues to the bit: the carried factors travel in it.
TEST(SidcoEstimate, ResumesToTheBitAcrossAReestimation) {
  constexpr int kSteps = 8;
  const Trained whole = train("carried", kSteps);
  int corrected_steps = 0;
  for (const StepStats& s : whole.steps) corrected_steps += s.corrected > 0;
  EXPECT_GE(corrected_steps, 1) << "the first step re-estimates: nothing is carried into it";
  const Trained fit = train("fit", kSteps);
  ASSERT_EQ(fit.updates.size(), whole.updates.size());
  EXPECT_NE(fit.updates.back(), whole.updates.back()) << "the carried factor changes the selection";
  for (int at = 1; at < kSteps; ++at) {
    SCOPED_TRACE("resumed after step " + std::to_string(at));
    const Trained resumed = train("carried", kSteps, at);
    ASSERT_EQ(resumed.updates.size(), whole.updates.size());
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(resumed.updates[std::size_t(s)], whole.updates[std::size_t(s)]) << s;
    EXPECT_EQ(resumed.summary.estimate_in_band, whole.summary.estimate_in_band);
    EXPECT_EQ(resumed.summary.corrected_share, whole.summary.corrected_share);
  }
}
