// BucketCompressor (the DDP hook's C++ step) and the shared step rules: equal to ModelCompressor
// bucket for bucket, residuals that follow their parameters into other buckets, the skip rule,
// the warm-up schedules and checkpoints that continue exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/base/error.hpp"

using gs::testing::error_message;
using namespace gs::compress;

namespace {

using gs::testing::grad;
using gs::testing::make_bucket;
using gs::testing::seeded;

// Two buckets of parameters {10: 300, 11: 200} and {12: 77}.
const std::vector<std::vector<BucketParam>> kBuckets = {{{10, 300}, {11, 200}}, {{12, 77}}};

}  // namespace

class BucketEqualsModel : public ::testing::TestWithParam<std::string> {};

// Bucket by bucket, the hook's exchange is ModelCompressor::step with one group per bucket: the
// same mean, to the bit, for every exchange kind.
TEST_P(BucketEqualsModel, MeanUpdatesToTheBit) {
  const std::string method = GetParam();
  const double density = density_based(method) ? 0.05 : 1.0;
  constexpr int kWorkers = 3, kSteps = 4;
  const std::uint64_t n0 = 500, n1 = 77;
  std::vector<std::vector<std::vector<float>>> bucket_out(kWorkers), model_out(kWorkers);
  run_workers(kWorkers, [&](Collectives& comm) {
    const int r = comm.rank();
    auto bc = make_bucket(method, density, r);
    ModelCompressor mc({{"bucket0", n0}, {"bucket1", n1}}, Granularity::layer, 0,
                       make_compressor(method, density, seeded(r)));
    for (int s = 0; s < kSteps; ++s) {
      const auto g = grad(n0 + n1, 100 * std::uint64_t(s) + std::uint64_t(r));
      std::vector<float> a(n0 + n1), b(n0 + n1);
      bc->exchange(0, std::span<const float>(g).first(n0), kBuckets[0], comm, std::span<float>(a).first(n0), false);
      bc->exchange(1, std::span<const float>(g).subspan(n0), kBuckets[1], comm, std::span<float>(a).subspan(n0), true);
      mc.step(g, comm, b);
      bucket_out[std::size_t(r)].push_back(a);
      model_out[std::size_t(r)].push_back(b);
    }
    EXPECT_EQ(bc->steps(), kSteps);
  });
  for (int r = 0; r < kWorkers; ++r)
    for (int s = 0; s < kSteps; ++s) {
      if (method == "none") {  // float sums in another order (per bucket vs whole): equal to rounding
        for (std::size_t i = 0; i < n0 + n1; ++i) EXPECT_NEAR(bucket_out[r][s][i], model_out[r][s][i], 1e-9) << i;
      } else {
        EXPECT_EQ(bucket_out[r][s], model_out[r][s]) << method << " step " << s << " worker " << r;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, BucketEqualsModel,
                         ::testing::Values("sidco-e", "sidco-gp", "topk", "dgc", "randomk", "none", "qsgd-mn", "fft"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

// DDP may regroup parameters after the first step: each parameter's residual goes with it. With one
// worker, what was sent plus what waits equals what came in, per parameter, at every step.
TEST(BucketCompressor, ResidualsFollowTheirParametersIntoOtherBuckets) {
  SoloCollectives solo;
  auto bc = make_bucket("topk", 0.05, 0);
  const std::vector<std::vector<std::vector<BucketParam>>> layouts = {
      kBuckets, {{{12, 77}, {11, 200}}, {{10, 300}}}, {{{11, 200}, {10, 300}, {12, 77}}}};
  std::map<std::uint64_t, std::vector<double>> in, sent;  // per parameter key, summed over steps
  for (int s = 0; s < 6; ++s) {
    const auto& layout = layouts[std::size_t(s) % layouts.size()];
    for (std::size_t b = 0; b < layout.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : layout[b]) n += p.numel;
      const auto g = grad(n, 31 * std::uint64_t(s) + b);
      std::vector<float> out(n);
      bc->exchange(int(b), g, layout[b], solo, out, b + 1 == layout.size());
      std::uint64_t at = 0;
      for (const auto& p : layout[b]) {
        auto& i = in[p.key];
        auto& o = sent[p.key];
        i.resize(p.numel);
        o.resize(p.numel);
        for (std::uint64_t j = 0; j < p.numel; ++j) {
          i[j] += g[at + j];
          o[j] += out[at + j];
        }
        at += p.numel;
      }
    }
  }
  // Through a checkpoint (residuals stored by parameter, in order of first sight), then one step
  // of zero gradients in a single bucket: what it sends comes from the residuals alone, and each
  // sent value must be what waited for that element (in - sent so far).
  gs::StateWriter w;
  bc->save_state(w);
  auto fresh = make_bucket("topk", 0.05, 0);
  gs::StateReader r(w.bytes(), "test");
  fresh->load_state(r);
  std::vector<float> zeros(577, 0.0f), out(577);
  const std::vector<BucketParam> all = {{10, 300}, {11, 200}, {12, 77}};
  fresh->exchange(0, zeros, all, solo, out, true);
  std::uint64_t at = 0;
  for (const auto& p : all) {
    for (std::uint64_t j = 0; j < p.numel; ++j) {
      const double waited = in[p.key][j] - sent[p.key][j];
      if (out[at + j] != 0.0f) {
        EXPECT_NEAR(out[at + j], waited, 1e-6) << p.key << "[" << j << "]";
      }
    }
    at += p.numel;
  }
  std::size_t nonzero = 0;
  for (float v : out) nonzero += v != 0.0f;
  EXPECT_EQ(nonzero, 28u);  // k = floor(577 * 0.05): the loaded residuals were there to send
}

TEST(BucketCompressor, ANonFiniteBucketIsSkippedEverywhereAndTenInARowFail) {
  constexpr int kWorkers = 2;
  std::vector<std::string> errors(kWorkers);
  std::vector<std::vector<bool>> skipped(kWorkers);
  run_workers(kWorkers, [&](Collectives& comm) {
    const int r = comm.rank();
    auto bc = make_bucket("sidco-e", 0.05, r);
    try {
      for (int s = 0; s < 20; ++s) {
        auto g = grad(577, std::uint64_t(s * 10 + r));
        if (s >= 2 && r == 1) g[5] = std::nanf("");  // worker 1 goes bad from step 2 on
        std::vector<float> out(577, 1.0f);
        bc->exchange(0, std::span<const float>(g).first(500), kBuckets[0], comm, std::span<float>(out).first(500),
                     false);
        bc->exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], comm, std::span<float>(out).subspan(500),
                     true);
        skipped[std::size_t(r)].push_back(bc->last_step_skipped());
        if (bc->last_step_skipped()) {
          for (float v : std::span<float>(out).first(500)) ASSERT_EQ(v, 0.0f);  // zeros, everywhere
        }
      }
    } catch (const gs::Error& e) {
      errors[std::size_t(r)] = e.what();
      EXPECT_EQ(bc->summary().skipped_steps, 10);
      EXPECT_EQ(bc->summary().steps, 12);
    }
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_NE(errors[std::size_t(r)].find("NaN or Inf for 10 steps in a row (last at step 11)"), std::string::npos)
        << errors[std::size_t(r)];
    const std::vector<bool> expected = {false, false, true, true, true, true, true, true, true, true, true};
    EXPECT_EQ(skipped[std::size_t(r)], expected);
  }
}

TEST(BucketCompressor, WarmupSchedulesAreTheTrainersOnes) {
  SoloCollectives solo;
  WarmupSchedule dense;
  dense.steps = 2;
  WarmupSchedule expo = dense;
  expo.kind = WarmupSchedule::Kind::exponential;
  expo.start_density = 0.5;
  for (const auto& w : {dense, expo}) {
    auto bc = make_bucket("topk", 0.01, 0, w);
    for (int s = 0; s < 4; ++s) {
      const auto g = grad(577, std::uint64_t(s));
      std::vector<float> out(577);
      bc->exchange(0, g, {{{1, 577}}}, solo, out, true);
      const StepStats& st = bc->history().back();
      EXPECT_EQ(st.warmup, s < 2);
      const double expected = s >= 2 ? 0.01 : w.exponential() ? 0.5 * std::pow(0.02, s / 2.0) : 1.0;
      EXPECT_NEAR(st.target_density, expected, 1e-12) << s;
      EXPECT_EQ(st.selected, s < 2 && !w.exponential() ? 577u : gs::fitting::target_count(577, expected));
    }
  }
  WarmupSchedule bad = expo;
  bad.start_density = 0.005;  // below the density
  EXPECT_NE(error_message([&] {
              bad.check(true, "topk", {"warmup_steps", "warmup", "warmup_start_ratio", "ratio"});
            }).find("warmup_start_ratio 0.005 must lie above ratio"),
            std::string::npos);
}

TEST(BucketCompressor, ACheckpointContinuesExactly) {
  SoloCollectives solo;
  auto a = make_bucket("sidco-e", 0.02, 0);
  auto b = make_bucket("sidco-e", 0.02, 0);
  auto run = [&](BucketCompressor& bc, int s) {
    std::vector<float> out(577);
    const auto g = grad(577, std::uint64_t(1000 + s));
    bc.exchange(0, std::span<const float>(g).first(500), kBuckets[0], solo, std::span<float>(out).first(500), false);
    bc.exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], solo, std::span<float>(out).subspan(500), true);
    return out;
  };
  for (int s = 0; s < 7; ++s) run(*a, s);
  gs::StateWriter w;
  a->save_state(w);
  gs::StateReader r(w.bytes(), "test");
  b->load_state(r);
  EXPECT_EQ(b->steps(), 7);
  for (int s = 7; s < 12; ++s) EXPECT_EQ(run(*a, s), run(*b, s)) << s;
  EXPECT_EQ(a->summary().quality_mean, b->summary().quality_mean);
  // A state of another compressor or warm-up is refused, naming what differs.
  WarmupSchedule w2;
  w2.steps = 3;
  auto other = make_bucket("sidco-e", 0.02, 0, w2);
  gs::StateReader r2(w.bytes(), "the saved state");
  EXPECT_NE(error_message([&] { other->load_state(r2); }).find("warm-up's length"), std::string::npos);
}

TEST(BucketCompressor, BadBucketsAreRefusedNamingTheProblem) {
  SoloCollectives solo;
  auto bc = make_bucket("topk", 0.05, 0);
  std::vector<float> g(100, 1.0f), out(100);
  EXPECT_NE(error_message([&] {
              bc->exchange(3, g, {{{1, 99}}}, solo, out, true);
            }).find("bucket 3: 100 elements for parameters of 99"),
            std::string::npos);
  bc->exchange(0, g, {{{1, 100}}}, solo, out, true);
  std::vector<float> g2(50, 1.0f), out2(50);
  EXPECT_NE(error_message([&] {
              bc->exchange(0, g2, {{{1, 50}}}, solo, out2, true);
            }).find("had 100 elements and now has 50"),
            std::string::npos);
}

// The dense bytes are what the bucket costs uncompressed in the model's own dtype (element_bytes:
// 2 for float16, 8 for float64), for every exchange kind and for a dense warm-up step; what is sent
// travels as float32 whatever that dtype, so bytes_sent does not change with it.
TEST(BucketCompressor, DenseBytesCountTheModelsDtype) {
  for (const std::string method : {"topk", "none", "qsgd-mn"}) {
    std::map<unsigned, std::vector<StepStats>> by_size;
    for (const unsigned size : {2u, 4u, 8u}) {
      SoloCollectives solo;
      WarmupSchedule w;
      w.steps = 1;  // the first step dense
      auto bc = make_bucket(method, density_based(method) ? 0.05 : 1.0, 0, w);
      for (std::uint64_t s = 0; s < 2; ++s) {
        const auto g = grad(577, s);
        std::vector<float> out(577);
        bc->exchange(0, std::span<const float>(g).first(500), kBuckets[0], solo, std::span<float>(out).first(500),
                     false, {}, 0.0, size);
        bc->exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], solo, std::span<float>(out).subspan(500),
                     true, {}, 0.0, size);
      }
      by_size[size].assign(bc->history().begin(), bc->history().end());
      EXPECT_DOUBLE_EQ(bc->summary().dense_bytes_per_step, 577.0 * size) << method;
    }
    for (const unsigned size : {2u, 8u})
      for (std::size_t s = 0; s < 2; ++s) {
        EXPECT_EQ(by_size[size][s].dense_bytes, 577u * size) << method << " step " << s;
        EXPECT_EQ(by_size[size][s].bytes_sent, by_size[4][s].bytes_sent) << method << " step " << s;
      }
  }
  SoloCollectives solo;
  auto bc = make_bucket("topk", 0.05, 0);
  std::vector<float> g(100, 1.0f), out(100);
  EXPECT_NE(error_message([&] {
              bc->exchange(0, g, {{{1, 100}}}, solo, out, true, {}, 0.0, 0);
            }).find("bucket 0: an element of 0 bytes"),
            std::string::npos);
  EXPECT_EQ(bc->steps(), 0);  // the step was abandoned, not counted
}

// The step's CPU time counts the thread's own work only: time inside the collectives is left out
// of it as of compress_seconds, and a thread that waits (for a collective, or for a core it
// shares with backward) accrues none.
TEST(BucketCompressor, CompressCpuTimeIsTheThreadsOwnWork) {
  struct SlowGather final : SoloCollectives {
    std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      return SoloCollectives::allgather(mine);
    }
  } slow;
  auto bc = make_bucket("topk", 0.01, 0);
  const auto g = grad(200000, 1);
  std::vector<float> out(g.size());
  bc->exchange(0, g, {{{1, g.size()}}}, slow, out, true);
  const StepStats& s = bc->history().back();
  EXPECT_GE(s.comm_seconds, 0.04);  // the sleep, inside the all-gather
  EXPECT_GT(s.compress_cpu_seconds, 0.0);
  EXPECT_LT(s.compress_cpu_seconds, 0.04);  // none of the sleep
  // A thread's CPU time cannot pass its wall time (1 ms for the clocks' granularity).
  EXPECT_LE(s.compress_cpu_seconds, s.compress_seconds + 1e-3);
}

TEST(StepRules, RunStatisticsSummariseEveryStep) {
  RunStatistics st;
  for (int s = 0; s < 5; ++s) {
    StepStats f;
    f.skipped = s == 4;
    f.warmup = s == 0;
    f.n = 100;
    f.selected = 1;                       // density 0.01
    f.target_density = 0.01 / (1.0 + s);  // quality 1 + s
    f.bytes_sent = 100 * std::uint64_t(s);
    st.add(f);
  }
  const RunSummary sum = st.summary();
  EXPECT_EQ(sum.steps, 5);
  EXPECT_EQ(sum.skipped_steps, 1);
  EXPECT_DOUBLE_EQ(sum.quality_mean, 3.0);      // steps 1 to 3: not the warm-up, not the skipped one
  EXPECT_DOUBLE_EQ(sum.bytes_per_step, 150.0);  // steps 0 to 3
}

// The waits' and overflow's sums travel in a hook's state; a state saved before them (the
// hook's state versions 4 and 5) loads with none counted, every other figure as it was.
TEST(StepRules, RunStatisticsLoadStatesWithAndWithoutTheWaits) {
  RunStatistics st;
  for (int s = 0; s < 4; ++s) {
    StepStats f;
    f.n = 100;
    f.selected = 1;
    f.target_density = 0.01;
    f.bytes_sent = 100;
    f.host_device_bytes = 640;
    f.host_syncs = 2;
    f.overflow = 3;
    f.link_bytes = 500;
    f.group_quality = {1.0, 1.0};  // two buckets, the second corrected to its exact top-k at step 0
    f.corrected = s == 0 ? 1 : 0;
    f.exact = s == 0 ? 1 : 0;
    f.estimate_n = 100;
    f.estimate_selected = s == 0 ? 3 : 1;  // the estimate out of [0.8, 1.25] at step 0 only
    st.add(f);
  }
  gs::StateWriter w;
  st.save_state(w);
  RunStatistics back;
  gs::StateReader r(w.bytes(), "a state");
  back.load_state(r);
  EXPECT_TRUE(r.at_end());
  EXPECT_DOUBLE_EQ(back.summary().host_syncs_per_step, 2.0);
  EXPECT_DOUBLE_EQ(back.summary().overflow_per_step, 3.0);
  EXPECT_DOUBLE_EQ(back.summary().estimate_in_band, 0.75);
  EXPECT_DOUBLE_EQ(back.summary().corrected_share, 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(back.summary().exact_share, 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(back.summary().link_bytes_per_step, 500.0);
  gs::StateReader before_links(std::string_view(w.bytes()).substr(0, w.bytes().size() - 8), "a state");
  RunStatistics unlinked;
  unlinked.load_state(before_links, true, true, false);  // the layout before the link bytes' sum
  EXPECT_TRUE(before_links.at_end());
  EXPECT_DOUBLE_EQ(unlinked.summary().link_bytes_per_step, 0.0);
  EXPECT_DOUBLE_EQ(unlinked.summary().corrected_share, 1.0 / 8.0);
  gs::StateReader before_estimates(std::string_view(w.bytes()).substr(0, w.bytes().size() - 6 * 8), "a state");
  RunStatistics without;
  without.load_state(before_estimates, true, false);  // the layout before the estimate's counts
  EXPECT_TRUE(before_estimates.at_end());
  EXPECT_DOUBLE_EQ(without.summary().estimate_in_band, 0.0);
  EXPECT_DOUBLE_EQ(without.summary().host_syncs_per_step, 2.0);

  gs::StateWriter older;  // the layout before the waits: steps, skipped, counted, critical, 11 sums
  for (std::int64_t v : {4, 0, 4, 0}) older.put(v);
  for (double v : {0.04, 0.04, 400.0, 0.0, 0.0, 2560.0, 0.0, 0.0, 0.0, 0.0, 0.0}) older.put(v);
  older.put_array<double>(std::vector<double>{1.0, 1.0, 1.0, 1.0});
  RunStatistics old;
  gs::StateReader ro(older.bytes(), "an older state");
  old.load_state(ro, false, false);
  EXPECT_TRUE(ro.at_end());
  EXPECT_EQ(old.summary().steps, 4);
  EXPECT_DOUBLE_EQ(old.summary().bytes_per_step, 100.0);
  EXPECT_DOUBLE_EQ(old.summary().host_device_bytes_per_step, 640.0);
  EXPECT_DOUBLE_EQ(old.summary().host_syncs_per_step, 0.0);
  EXPECT_DOUBLE_EQ(old.summary().overflow_per_step, 0.0);
  gs::StateReader wrong(older.bytes(), "an older state");
  EXPECT_THROW(RunStatistics().load_state(wrong), gs::Error);  // read as the new layout: it ends early
}

// The residuals change only with a whole step: a step skipped on its second bucket leaves the
// first bucket's residual as it was, so the next step sends what a run without that step sends.
TEST(BucketCompressor, ASkippedStepLeavesEveryResidualAsItWas) {
  constexpr int kWorkers = 2;
  std::vector<std::vector<float>> with_skip(kWorkers), without(kWorkers);
  for (const bool skip : {true, false}) {
    run_workers(kWorkers, [&](Collectives& comm) {
      const int r = comm.rank();
      auto bc = make_bucket("topk", 0.05, r);
      std::vector<float> out(577);
      auto step = [&](std::uint64_t seed, bool poison) {
        auto g = grad(577, seed * 10 + std::uint64_t(r));
        if (poison && r == 1) g[550] = std::nanf("");  // in the second bucket only
        bc->exchange(0, std::span<const float>(g).first(500), kBuckets[0], comm, std::span<float>(out).first(500),
                     false);
        bc->exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], comm, std::span<float>(out).subspan(500),
                     true);
      };
      step(1, false);
      if (skip) {
        step(2, true);
        EXPECT_TRUE(bc->last_step_skipped());
      }
      step(3, false);
      (skip ? with_skip : without)[std::size_t(r)] = out;
    });
  }
  for (int r = 0; r < kWorkers; ++r) EXPECT_EQ(with_skip[r], without[r]) << "worker " << r;
}

// An error in a bucket abandons its step: the step's other buckets are refused, nothing of it is
// kept, and the next step runs as if it never happened.
TEST(BucketCompressor, AFailedBucketAbandonsItsStep) {
  SoloCollectives solo;
  auto a = make_bucket("topk", 0.05, 0), b = make_bucket("topk", 0.05, 0);
  const std::vector<std::vector<BucketParam>> three = {{{10, 300}}, {{11, 200}}, {{12, 77}}};
  auto step = [&](BucketCompressor& bc, std::uint64_t seed) {
    const auto g = grad(577, seed);
    std::vector<float> out(577);
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < three.size(); ++i) {
      const auto n = three[i][0].numel;
      bc.exchange(int(i), std::span<const float>(g).subspan(at, n), three[i], solo,
                  std::span<float>(out).subspan(at, n), i + 1 == three.size());
      at += n;
    }
    return out;
  };
  step(*a, 1);
  step(*b, 1);
  const auto g = grad(577, 2);
  std::vector<float> out(577);
  a->exchange(0, std::span<const float>(g).first(300), three[0], solo, std::span<float>(out).first(300), false);
  const std::vector<BucketParam> wrong = {{11, 199}};
  EXPECT_NE(error_message([&] {
              a->exchange(1, std::span<const float>(g).subspan(300, 200), wrong, solo,
                          std::span<float>(out).subspan(300, 200), false);
            }).find("bucket 1: 200 elements for parameters of 199"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              a->exchange(2, std::span<const float>(g).subspan(500), three[2], solo, std::span<float>(out).subspan(500),
                          true);
            }).find("an earlier bucket of this step failed"),
            std::string::npos);
  EXPECT_EQ(a->steps(), 1);
  EXPECT_FALSE(a->mid_step());
  EXPECT_EQ(step(*a, 3), step(*b, 3));
}
