// Momentum correction (gs/compress/momentum.hpp) in BucketCompressor, the DDP hook's step: the
// same updates as ModelCompressor's (gradscope train's), each parameter's velocity following it
// into other buckets and through a checkpoint, a skipped step leaving it untouched, device
// buckets taking the host path, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <vector>

#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"

using namespace gs::compress;
using gs::testing::error_message;
using gs::testing::grad;

namespace {

constexpr double kM = 0.9;
const std::vector<std::vector<BucketParam>> kBuckets = {{{10, 300}, {11, 200}}, {{12, 77}}};

std::unique_ptr<BucketCompressor> with_momentum(const std::string& method, double density, int rank,
                                                const std::string& backend = "cpu") {
  auto bc = gs::testing::make_bucket(method, density, rank, {}, backend);
  bc->set_momentum_correction(kM, "momentum_correction");
  return bc;
}

}  // namespace

// Bucket by bucket, the hook's exchange with momentum correction is ModelCompressor::step with it
// (one group per bucket): the same means, to the bit.
TEST(BucketMomentumCorrection, EqualsTheModelCompressorToTheBit) {
  for (const std::string method : {"topk", "sidco-e", "dgc"}) {
    constexpr int kWorkers = 3, kSteps = 5;
    std::vector<std::vector<std::vector<float>>> bucket_out(kWorkers), model_out(kWorkers);
    run_workers(kWorkers, [&](Collectives& comm) {
      const int r = comm.rank();
      auto bc = with_momentum(method, 0.05, r);
      ModelCompressor mc({{"bucket0", 500}, {"bucket1", 77}}, Granularity::layer, 0,
                         make_compressor(method, 0.05, gs::testing::seeded(r)));
      mc.set_momentum_correction(kM);
      for (int s = 0; s < kSteps; ++s) {
        const auto g = grad(577, 100 * std::uint64_t(s) + std::uint64_t(r));
        std::vector<float> a(577), b(577);
        bc->exchange(0, std::span<const float>(g).first(500), kBuckets[0], comm, std::span<float>(a).first(500), false);
        bc->exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], comm, std::span<float>(a).subspan(500),
                     true);
        mc.step(g, comm, b);
        bucket_out[std::size_t(r)].push_back(a);
        model_out[std::size_t(r)].push_back(b);
      }
    });
    for (int r = 0; r < kWorkers; ++r)
      for (int s = 0; s < kSteps; ++s)
        EXPECT_EQ(bucket_out[r][s], model_out[r][s]) << method << " step " << s << " worker " << r;
  }
}

// The pass that writes the accumulator takes SIDCo's stage-1 statistics on the way (StatsOnWrite):
// in each setting (momentum correction on or off, error feedback or none), the same accumulator as
// without, and statistics that are cpu::stats of it to the bit; where no pass writes it (acc is g)
// none are taken. Over three steps of sent and zeroed entries, on a vector of several chunks.
TEST(BucketMomentumCorrection, StatsTakenAsTheAccumulatorIsWrittenAreItsOwn) {
  const std::size_t n = 2 * gs::kernels::cpu::kChunk + 1001;
  auto c = make_compressor("sidco-e", 0.01, {});
  const auto fields = c->stats_on_write();
  ASSERT_TRUE(fields) << "SIDCo-E on the CPU backend asks for stage 1's statistics";
  for (const double m : {0.0, kM})
    for (const bool ef : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "momentum " << m << ", error feedback " << ef);
      MomentumCorrection taking = m > 0 ? MomentumCorrection(m, *c, "m") : MomentumCorrection();
      MomentumCorrection reading = taking;
      ResidualMemory taking_e, reading_e;
      for (int s = 0; s < 3; ++s) {
        const auto g = grad(n, 300 + std::uint64_t(s));
        StatsOnWrite stats{*fields, std::nullopt};
        const auto a = taking.accumulate("b", g, ef ? &taking_e : nullptr, &stats);
        const auto b = reading.accumulate("b", g, ef ? &reading_e : nullptr);
        ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
        if (m == 0.0 && !ef) {
          EXPECT_FALSE(stats.taken) << "nothing wrote acc: it is g";
          continue;
        }
        ASSERT_TRUE(stats.taken);
        const auto want = gs::kernels::cpu::stats(b, *fields);
        EXPECT_EQ(stats.taken->count, want.count);
        EXPECT_EQ(stats.taken->zeros, want.zeros);
        EXPECT_EQ(std::bit_cast<std::uint64_t>(stats.taken->sum), std::bit_cast<std::uint64_t>(want.sum));
        EXPECT_EQ(stats.taken->min, want.min);
        EXPECT_EQ(stats.taken->max, want.max);
        // The given statistics select what a read of acc selects (a fresh compressor each).
        auto given = make_compressor("sidco-e", 0.01, {});
        auto read = make_compressor("sidco-e", 0.01, {});
        const Compressed x = given->compress_given(a, "b", *stats.taken);
        const Compressed y = read->compress(b, "b");
        EXPECT_EQ(x.payload.indices, y.payload.indices);
        EXPECT_EQ(x.payload.values, y.payload.values);
        EXPECT_EQ(x.info.threshold, y.info.threshold);
        if (ef) {
          taking_e.commit("b", y.payload, *c);
          reading_e.commit("b", y.payload, *c);
        }
        if (m > 0) {
          taking.commit("b", y.payload, *c);
          reading.commit("b", y.payload, *c);
        }
      }
    }
}

// DDP may regroup parameters after the first step: each parameter's velocity goes with it, and
// through a checkpoint (stored by parameter). One worker, checked against the rule itself kept per
// parameter: u = m u + g, acc = e + u, what was sent is acc there, and e and u are zero there.
TEST(BucketMomentumCorrection, VelocitiesFollowTheirParametersIntoOtherBuckets) {
  SoloCollectives solo;
  auto bc = with_momentum("topk", 0.05, 0);
  const std::vector<std::vector<std::vector<BucketParam>>> layouts = {
      kBuckets, {{{12, 77}, {11, 200}}, {{10, 300}}}, {{{11, 200}, {10, 300}, {12, 77}}}};
  std::map<std::uint64_t, std::vector<float>> u, e;  // the reference, per parameter key
  int sent_total = 0;
  for (int s = 0; s < 9; ++s) {
    if (s == 5) {  // a checkpoint, loaded into a new state
      gs::StateWriter w;
      bc->save_state(w);
      auto fresh = with_momentum("topk", 0.05, 0);
      gs::StateReader r(w.bytes(), "test");
      fresh->load_state(r);
      // A new process numbers the parameters as DDP first hands them over (registration order).
      fresh->name_parameters(kBuckets[0], 500, 0);
      fresh->name_parameters(kBuckets[1], 77, 1);
      bc = std::move(fresh);
    }
    const auto& layout = layouts[std::size_t(s) % layouts.size()];
    for (std::size_t b = 0; b < layout.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : layout[b]) n += p.numel;
      const auto g = grad(n, 31 * std::uint64_t(s) + b);
      std::vector<float> out(n);
      bc->exchange(int(b), g, layout[b], solo, out, b + 1 == layout.size());
      std::uint64_t at = 0;
      for (const auto& p : layout[b]) {
        auto& pu = u[p.key];
        auto& pe = e[p.key];
        pu.resize(p.numel);
        pe.resize(p.numel);
        for (std::uint64_t j = 0; j < p.numel; ++j) {
          pu[j] = float(kM) * pu[j] + g[at + j];
          const float acc = pe[j] + pu[j];
          const float sent = out[at + j];
          if (sent != 0.0f) {
            ASSERT_EQ(sent, acc) << "step " << s << " parameter " << p.key << " element " << j;
            pe[j] = 0.0f;
            pu[j] = 0.0f;
            ++sent_total;
          } else {
            pe[j] = acc;
          }
        }
        at += p.numel;
      }
    }
  }
  EXPECT_GT(sent_total, 9 * 25);
}

// A step skipped on any worker (NaN) leaves every velocity as it was: the next step goes as if
// the skipped one had not been.
TEST(BucketMomentumCorrection, ASkippedStepLeavesTheVelocity) {
  std::vector<std::vector<float>> with_skip(2), without(2);
  run_workers(2, [&](Collectives& comm) {
    const auto r = std::size_t(comm.rank());
    for (const bool skip : {true, false}) {
      auto bc = with_momentum("topk", 0.05, comm.rank());
      std::vector<float> out(577);
      for (int s = 0; s < 4; ++s) {
        if (s == 2 && !skip) continue;
        auto g = grad(577, 10 * std::uint64_t(s) + r);
        if (s == 2 && r == 1) g[5] = NAN;
        bc->exchange(0, std::span<const float>(g).first(500), kBuckets[0], comm, std::span<float>(out).first(500),
                     false);
        bc->exchange(1, std::span<const float>(g).subspan(500), kBuckets[1], comm, std::span<float>(out).subspan(500),
                     true);
        EXPECT_EQ(bc->last_step_skipped(), s == 2);
      }
      (skip ? with_skip : without)[r] = out;
    }
  });
  EXPECT_EQ(with_skip, without);
}

// A device bucket with momentum correction takes the host path (its velocity lives in host
// memory): the same update as a host bucket, to the bit.
TEST(BucketMomentumCorrection, DeviceBucketsTakeTheHostPath) {
  std::vector<std::vector<float>> host(2), device(2);
  run_workers(2, [&](Collectives& comm) {
    const auto r = std::size_t(comm.rank());
    auto h = with_momentum("sidco-e", 0.05, comm.rank());
    auto d = with_momentum("sidco-e", 0.05, comm.rank(), "cuda-host");
    const int dev = comm.rank() + 1;
    for (int s = 0; s < 4; ++s) {
      auto g = grad(577, 7 * std::uint64_t(s) + r);
      std::vector<float> out(577);
      for (std::size_t b = 0; b < 2; ++b) {
        const std::size_t at = b == 0 ? 0 : 500, n = b == 0 ? 500 : 77;
        h->exchange(int(b), std::span<const float>(g).subspan(at, n), kBuckets[b], comm,
                    std::span<float>(out).subspan(at, n), b == 1);
      }
      host[r].insert(host[r].end(), out.begin(), out.end());
      const gs::kernels::cuda_host::DeviceMemory on(g.data(), g.size() * sizeof(float), dev);
      const gs::kernels::CallerStream caller(dev, gs::kernels::cuda_host::caller_stream(dev));
      for (std::size_t b = 0; b < 2; ++b) {
        const std::size_t at = b == 0 ? 0 : 500, n = b == 0 ? 500 : 77;
        d->exchange_resident({int(b), g.data() + at, n, gs::kernels::BackendKind::cuda_host, dev}, kBuckets[b], comm,
                             nullptr, b == 1);
      }
      device[r].insert(device[r].end(), g.begin(), g.end());
    }
  });
  EXPECT_EQ(device, host);
}

TEST(BucketMomentumCorrection, RefusedWhereNothingIsMaskedInTheCallersWords) {
  auto dense = gs::testing::make_bucket("none", 1.0, 0);
  const std::string m = error_message([&] { dense->set_momentum_correction(0.9, "momentum_correction"); });
  EXPECT_NE(m.find("momentum_correction masks the coordinates"), std::string::npos) << m;
  EXPECT_NE(m.find("'none' is not one"), std::string::npos) << m;
  EXPECT_NO_THROW(dense->set_momentum_correction(0.0, "momentum_correction"));
  auto sparse = gs::testing::make_bucket("topk", 0.1, 0);
  EXPECT_NE(error_message([&] { sparse->set_momentum_correction(1.0, "momentum_correction"); }).find("[0, 1)"),
            std::string::npos);
  // A state with velocities does not load where there is no momentum correction.
  SoloCollectives solo;
  auto a = with_momentum("topk", 0.1, 0);
  std::vector<float> g = grad(77, 1), out(77);
  a->exchange(0, g, kBuckets[1], solo, out, true);
  gs::StateWriter w;
  a->save_state(w);
  gs::StateReader r(w.bytes(), "test");
  EXPECT_NE(error_message([&] { sparse->load_state(r); }).find("momentum correction"), std::string::npos);
}
