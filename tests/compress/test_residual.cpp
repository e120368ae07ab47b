// Error feedback: scatter(values, idx) + e == acc, element for element, exactly, for every
// compressor, over several steps of fresh random gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/random_data.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/residual.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {
using gs::testing::laplace;
}  // namespace

class ResidualInvariant : public ::testing::TestWithParam<std::string_view> {};

TEST_P(ResidualInvariant, HoldsExactlyOverSteps) {
  for (double density : {0.1, 0.01}) {
    auto c = make_compressor(GetParam(), density, {.seed = 5});
    if (c->exchange() == Exchange::collective) {
      // Own protocol: what is sent is decoded by the compressor itself. With error feedback the
      // residual keeps acc - sent (the sum then equals acc up to rounding); without it
      // (unbiased quantizers) the residual memory is never touched.
      ResidualMemory mem;
      SoloCollectives solo;
      for (int step = 0; step < 4; ++step) {
        const auto g = laplace(20000, 700 + std::uint64_t(step), 1e-3f);
        const auto acc_view = c->error_feedback() ? mem.accumulate("v", g) : std::span<const float>(g);
        const std::vector<float> acc(acc_view.begin(), acc_view.end());
        std::vector<float> sent(acc.size()), mean(acc.size());
        c->exchange(acc, "v", solo, sent, mean);
        for (std::size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(sent[i], mean[i]) << "one worker";
        if (!c->error_feedback()) continue;
        mem.commit_decoded("v", sent);
        const auto e = mem.residual("v");
        for (std::size_t i = 0; i < acc.size(); ++i) {
          ASSERT_EQ(e[i], acc[i] - sent[i]);
          // One rounding of acc - sent, relative to the larger of the two.
          ASSERT_NEAR(sent[i] + e[i], acc[i], 1.2e-7f * (std::fabs(acc[i]) + std::fabs(sent[i])) + 1e-30f);
        }
      }
      EXPECT_EQ(mem.size(), c->error_feedback() ? 1u : 0u);
      c->end_step();
      continue;
    }
    ResidualMemory mem;
    for (int step = 0; step < 6; ++step) {
      for (std::size_t layer = 0; layer < 2; ++layer) {
        const std::string name = "layer" + std::to_string(layer);
        const auto g = laplace(layer == 0 ? 20000 : 3001, 100 * step + layer, 1e-3f);
        auto acc_view = mem.accumulate(name, g);
        const std::vector<float> acc(acc_view.begin(), acc_view.end());
        if (c->needs_gradient_variance())  // variance-based: about |g|^2, so some are sent
          c->add_gradient_variance(name, std::vector<float>(acc.size(), 1e-6f));
        const Compressed out = c->compress(acc, name);
        validate(out.payload, true);
        mem.commit(name, out.payload, *c);
        std::vector<float> sent(acc.size());
        c->decompress(out.payload, sent);
        const auto e = mem.residual(name);
        for (std::size_t i = 0; i < acc.size(); ++i)
          ASSERT_EQ(sent[i] + e[i], acc[i]) << GetParam() << " step " << step << " i " << i;
        if (out.payload.kind == PayloadKind::sparse) {
          for (std::int32_t i : out.payload.indices) ASSERT_EQ(e[std::size_t(i)], 0.0f);
        }
      }
      c->end_step();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCompressors, ResidualInvariant,
                         ::testing::ValuesIn(compressor_names().begin(), compressor_names().end()),
                         [](const auto& info) {
                           std::string s(info.param);
                           for (auto& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(ResidualMemory, CarriesUnsentMassToTheNextStep) {
  auto c = make_compressor("topk", 0.25);
  ResidualMemory mem;
  const std::vector<float> g1 = {4.0f, -1.0f, 0.5f, 2.0f};
  auto acc1 = mem.accumulate("w", g1);
  std::vector<float> a1(acc1.begin(), acc1.end());
  auto out = c->compress(a1, "w");  // k = 1: sends 4.0
  mem.commit("w", out.payload, *c);
  EXPECT_EQ(out.payload.indices, std::vector<std::int32_t>{0});
  const std::vector<float> g2 = {0.25f, 0.25f, 0.25f, 0.25f};
  auto acc2 = mem.accumulate("w", g2);
  EXPECT_FLOAT_EQ(acc2[0], 0.25f);
  EXPECT_FLOAT_EQ(acc2[1], -0.75f);
  EXPECT_FLOAT_EQ(acc2[2], 0.75f);
  EXPECT_FLOAT_EQ(acc2[3], 2.25f);
}

TEST(ResidualMemory, MisuseThrows) {
  auto c = make_compressor("topk", 0.5);
  ResidualMemory mem;
  const std::vector<float> g = {1.0f, 2.0f, 3.0f};
  EXPECT_THROW(mem.commit("w", Payload{}, *c), gs::Error);  // nothing accumulated
  mem.accumulate("w", g);
  const std::vector<float> shorter = {1.0f};
  EXPECT_THROW(mem.accumulate("w", shorter), gs::Error);
  EXPECT_THROW(mem.residual("nope"), gs::Error);
  Payload wrong_n;
  wrong_n.n = 7;
  mem.accumulate("w", g);
  EXPECT_THROW(mem.commit("w", wrong_n, *c), gs::Error);
}
