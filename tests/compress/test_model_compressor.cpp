#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {
const std::vector<TensorSpec> kModel = {{"fc1.weight", 3000}, {"fc1.bias", 30}, {"fc2.weight", 1500}};

std::vector<float> normal(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.01f);
  std::vector<float> g(n);
  for (auto& v : g) v = d(rng);
  return g;
}
}  // namespace

TEST(Granularity, GroupsCoverTheModelInOrder) {
  auto layer = make_groups(kModel, Granularity::layer);
  ASSERT_EQ(layer.size(), 3u);
  EXPECT_EQ(layer[1].name, "fc1.bias");
  EXPECT_EQ(layer[1].offset, 3000u);
  EXPECT_EQ(layer[2].offset, 3030u);
  auto model = make_groups(kModel, Granularity::model);
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model[0].size, 4530u);
  auto bucket = make_groups(kModel, Granularity::bucket, 1000);
  ASSERT_EQ(bucket.size(), 5u);
  EXPECT_EQ(bucket[4].offset, 4000u);
  EXPECT_EQ(bucket[4].size, 530u);
  EXPECT_EQ(parse_granularity("bucket"), Granularity::bucket);
}

TEST(Granularity, BadInputThrows) {
  EXPECT_THROW(parse_granularity("tensor"), gs::Error);
  EXPECT_THROW(make_groups({}, Granularity::layer), gs::Error);
  EXPECT_THROW(make_groups(kModel, Granularity::bucket, 0), gs::Error);
  const std::vector<TensorSpec> repeated = {{"a", 3}, {"a", 4}};
  EXPECT_THROW(make_groups(repeated, Granularity::layer), gs::Error);
  const std::vector<TensorSpec> empty = {{"a", 0}};
  EXPECT_THROW(make_groups(empty, Granularity::model), gs::Error);
}

// Over many steps nothing is lost: sum of gradients == sum of what was sent + final residual
// (up to float rounding of the running sums), at every granularity and across a density change.
TEST(ModelCompressor, ConservesGradientMass) {
  for (auto gran : {Granularity::layer, Granularity::model, Granularity::bucket}) {
    ModelCompressor mc(kModel, gran, 700, make_compressor("topk", 0.2));
    std::vector<double> sum_g(mc.numel(), 0.0), sum_sent(mc.numel(), 0.0);
    for (int step = 0; step < 8; ++step) {
      if (step == 3) mc.set_density(0.05);  // the residual carries over a change of density
      const auto g = normal(mc.numel(), 50 + step);
      StepStats st;
      const Payload p = mc.compress(g, &st);
      validate(p, true);
      EXPECT_EQ(p.n, mc.numel());
      EXPECT_EQ(st.selected, p.count());
      EXPECT_EQ(st.bytes_sent, p.wire_bytes());
      EXPECT_LT(st.bytes_sent, p.count() * 8);  // ascending indices: Rice-coded gaps, not int32s
      EXPECT_EQ(st.dense_bytes, mc.numel() * 4);
      EXPECT_EQ(st.group_quality.size(), mc.groups().size());
      std::vector<float> sent(mc.numel());
      const std::vector<Payload> one = {p};
      mc.aggregate(one, sent);
      for (std::size_t i = 0; i < g.size(); ++i) {
        sum_g[i] += g[i];
        sum_sent[i] += sent[i];
      }
    }
    const auto e = mc.flat_residual();
    for (std::size_t i = 0; i < e.size(); ++i)
      ASSERT_NEAR(sum_sent[i] + e[i], sum_g[i], 1e-6) << to_string(gran) << " i " << i;
  }
}

TEST(ModelCompressor, DensePathAndErrors) {
  ModelCompressor mc(kModel, Granularity::layer, 0, make_compressor("none", 1.0));
  const auto g = normal(mc.numel(), 3);
  StepStats st;
  const Payload p = mc.compress(g, &st);
  EXPECT_EQ(p.kind, PayloadKind::dense);
  EXPECT_EQ(p.values, g);
  EXPECT_EQ(st.bytes_sent, st.dense_bytes);
  std::vector<float> mean(mc.numel());
  mc.decode_sum(p, 1, mean);
  EXPECT_EQ(mean, g);
  const std::vector<float> wrong(10);
  EXPECT_THROW(mc.compress(wrong), gs::Error);
  EXPECT_THROW(ModelCompressor(kModel, Granularity::layer, 0, nullptr), gs::Error);
}

// step() over in-process workers gives what compress() + the matching exchange gives.
TEST(ModelCompressorStep, MatchesCompressAndAggregateForEveryExchangeKind) {
  for (const char* name : {"topk", "none"}) {
    const int workers = 3;
    std::vector<std::vector<float>> grads, stepped(workers);
    for (int r = 0; r < workers; ++r) grads.push_back(normal(4530, 100 + std::uint64_t(r)));
    run_workers(workers, [&](Collectives& comm) {
      ModelCompressor mc(kModel, Granularity::layer, 0, make_compressor(name, 0.05));
      auto& out = stepped[std::size_t(comm.rank())];
      out.assign(mc.numel(), 0.0f);
      StepStats st;
      mc.step(grads[std::size_t(comm.rank())], comm, out, &st);
      EXPECT_GT(st.bytes_sent, 0u);
      EXPECT_GE(st.comm_seconds, 0.0);
    });
    // Reference: the same workers one by one, combined by aggregate/decode_sum.
    std::vector<Payload> payloads;
    std::unique_ptr<ModelCompressor> last;
    for (int r = 0; r < workers; ++r) {
      last = std::make_unique<ModelCompressor>(kModel, Granularity::layer, 0, make_compressor(name, 0.05));
      payloads.push_back(last->compress(grads[std::size_t(r)]));
    }
    std::vector<float> ref(4530);
    if (std::string(name) == "none") {
      Payload sum = payloads[0];
      for (int r = 1; r < workers; ++r)
        for (std::size_t i = 0; i < sum.values.size(); ++i) sum.values[i] += payloads[std::size_t(r)].values[i];
      last->decode_sum(sum, workers, ref);
    } else {
      last->aggregate(payloads, ref);
    }
    for (int r = 0; r < workers; ++r)
      for (std::size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(stepped[std::size_t(r)][i], ref[i], 1e-7f) << name << " worker " << r << " at " << i;
  }
}

TEST(ModelCompressorStep, AFailingWorkerStopsTheOthersWithAnError) {
  EXPECT_THROW(run_workers(
                   2,
                   [&](Collectives& comm) {
                     if (comm.rank() == 1) throw gs::Error("worker 1 broke");
                     ModelCompressor mc(kModel, Granularity::model, 0, make_compressor("topk", 0.1));
                     std::vector<float> out(mc.numel());
                     mc.step(normal(4530, 7), comm, out);
                   },
                   std::chrono::milliseconds(5000)),
               gs::Error);
}

TEST(ModelCompressorMomentumCorrection, VelocityIsErrorFedAndMaskedWhereSent) {
  const double m = 0.9;
  ModelCompressor mc(kModel, Granularity::model, 0, make_compressor("topk", 0.01));
  mc.set_momentum_correction(m);
  std::vector<float> u(4530, 0.0f), e(4530, 0.0f);
  for (int step = 0; step < 4; ++step) {
    const auto g = normal(4530, 300 + std::uint64_t(step));
    const Payload p = mc.compress(g);
    // Reference: u = m u + g; acc = e + u; sent entries leave e and u at zero.
    std::vector<float> acc(4530);
    for (std::size_t i = 0; i < acc.size(); ++i) {
      u[i] = float(m) * u[i] + g[i];
      acc[i] = e[i] + u[i];
    }
    e = acc;
    ASSERT_EQ(p.count(), gs::fitting::target_count(4530, 0.01));
    for (std::size_t j = 0; j < p.count(); ++j) {
      const auto i = std::size_t(p.indices[j]);
      ASSERT_EQ(p.values[j], acc[i]) << "step " << step;
      e[i] = 0.0f;
      u[i] = 0.0f;
    }
    const auto r = mc.flat_residual();
    for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], e[i]) << "step " << step << " at " << i;
  }
}

TEST(ModelCompressorMomentumCorrection, RefusedWhereNothingIsMasked) {
  ModelCompressor dense(kModel, Granularity::model, 0, make_compressor("none", 1.0));
  EXPECT_THROW(dense.set_momentum_correction(0.9), gs::Error);
  EXPECT_NO_THROW(dense.set_momentum_correction(0.0));
  ModelCompressor sparse(kModel, Granularity::model, 0, make_compressor("topk", 0.1));
  EXPECT_THROW(sparse.set_momentum_correction(1.0), gs::Error);
  EXPECT_THROW(sparse.set_momentum_correction(-0.1), gs::Error);
}
