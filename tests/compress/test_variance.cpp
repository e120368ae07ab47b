// The variance compressor (algorithms.md section 6): selection rule acc^2 > alpha v, the v update
// (reset where sent, times zeta elsewhere), the residual invariant through ModelCompressor, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "gs/compress/model_compressor.hpp"
#include "common/error_message.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {

std::vector<float> normal(std::size_t n, std::uint64_t seed, float sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> g(n);
  for (auto& v : g) v = d(rng);
  return g;
}
// Positive, spread over two decades: plausible per-element variances of a mini-batch mean.
std::vector<float> variances(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> e(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * std::pow(10.0f, e(rng));
  return v;
}
CompressorOptions options(double alpha, double zeta = 0.999) {
  CompressorOptions o;
  o.variance_alpha = alpha;
  o.variance_zeta = zeta;
  return o;
}

}  // namespace

// Hand-made vectors; powers of two keep every product exact, so the boundaries are exact too.
TEST(Variance, SelectionRuleAndVarianceUpdate) {
  auto c = make_compressor("variance", 0.01, options(1.0, 0.5));
  EXPECT_TRUE(c->needs_gradient_variance());
  EXPECT_EQ(c->exchange(), Exchange::allgather);

  // Step 1: v = {1, 4, 0.25, 0, 1}; acc^2 = {4, 1, 0.25, 0, 2.25}.
  c->add_gradient_variance("w", std::vector<float>{1.0f, 4.0f, 0.25f, 0.0f, 1.0f});
  auto out = c->compress(std::vector<float>{2.0f, 1.0f, -0.5f, 0.0f, -1.5f}, "w");
  // Strictly greater: 0.25 == 0.25 and 0 == 0 stay.
  EXPECT_EQ(out.payload.indices, (std::vector<std::int32_t>{0, 4}));
  EXPECT_EQ(out.payload.values, (std::vector<float>{2.0f, -1.5f}));
  EXPECT_EQ(out.info.n, 5u);
  EXPECT_EQ(out.info.selected, 2u);
  EXPECT_DOUBLE_EQ(out.info.target_density, 0.01);  // nominal: the density is reported, not used
  EXPECT_TRUE(std::isnan(out.info.threshold));
  // v is now {0, 2, 0.125, 0, 0}.

  // Step 2: v += 0.5 -> {0.5, 2.5, 0.625, 0.5, 0.5}. Probe each element just below / above
  // sqrt(v): 0.5 -> 0.70 (0.49, stays) / 0.71 (0.5041, sent).
  c->add_gradient_variance("w", std::vector<float>(5, 0.5f));
  out = c->compress(std::vector<float>{0.70f, 1.59f, -0.80f, 0.71f, -0.71f}, "w");
  // 0.49 < 0.5 stays; 2.5281 > 2.5, 0.64 > 0.625 and 0.5041 > 0.5 (twice) are sent.
  EXPECT_EQ(out.payload.indices, (std::vector<std::int32_t>{1, 2, 3, 4}));
  // v is now {0.25, 0, 0, 0, 0}.

  // Step 3: v += {0, 1, 1, 1, 1} -> {0.25, 1, 1, 1, 1}.
  c->add_gradient_variance("w", std::vector<float>{0.0f, 1.0f, 1.0f, 1.0f, 1.0f});
  out = c->compress(std::vector<float>{0.49f, 0.99f, 1.01f, -1.01f, 0.5f}, "w");
  EXPECT_EQ(out.payload.indices, (std::vector<std::int32_t>{2, 3}));
  // v is now {0.125, 0.5, 0, 0, 0.5}: 0.36 > 0.125 sent, 0.499 < 0.5 stays, 0.01 > 0 sent,
  // 0 = 0 stays, 0.64 > 0.5 sent.
  c->add_gradient_variance("w", std::vector<float>(5, 0.0f));
  out = c->compress(std::vector<float>{0.6f, std::sqrt(0.5f) * 0.999f, 0.1f, 0.0f, 0.8f}, "w");
  EXPECT_EQ(out.payload.indices, (std::vector<std::int32_t>{0, 2, 4}));

  // Each tensor has its own v.
  c->add_gradient_variance("b", std::vector<float>{4.0f});
  EXPECT_EQ(c->compress(std::vector<float>{1.0f}, "b").info.selected, 0u);
}

// A larger alpha asks more of an element before it is sent: fewer sent, and exactly the count of
// acc^2 > alpha v on a first step.
TEST(Variance, LargerAlphaSendsFewer) {
  const auto acc = normal(20000, 3, 1e-2f);
  const auto v = variances(acc.size(), 4, 1e-4f);
  std::uint64_t last = acc.size() + 1;
  for (double alpha : {0.25, 1.0, 2.0, 4.0, 16.0}) {
    auto c = make_compressor("variance", 0.01, options(alpha));
    c->add_gradient_variance("w", v);
    const auto out = c->compress(acc, "w");
    validate(out.payload, true);
    std::uint64_t want = 0;
    for (std::size_t i = 0; i < acc.size(); ++i) want += double(acc[i]) * acc[i] > alpha * double(v[i]);
    EXPECT_EQ(out.info.selected, want) << "alpha " << alpha;
    EXPECT_LT(out.info.selected, last) << "alpha " << alpha;
    EXPECT_GT(out.info.selected, 0u) << "alpha " << alpha;
    last = out.info.selected;
  }
}

// Through ModelCompressor over several steps and granularities: every step, the gradient plus the
// previous residual (in float, as the residual memory adds them) equals what was sent plus the new
// residual, element for element, exactly; and the selection matches a plain re-implementation of
// the rule that keeps its own v per group.
TEST(Variance, ResidualInvariantExactThroughModelCompressor) {
  const std::vector<TensorSpec> model = {{"fc1.weight", 3000}, {"fc1.bias", 30}, {"fc2.weight", 1500}};
  const double alpha = 1.5, zeta = 0.9;
  for (auto gran : {Granularity::layer, Granularity::model, Granularity::bucket}) {
    ModelCompressor mc(model, gran, 700, make_compressor("variance", 0.01, options(alpha, zeta)));
    std::vector<float> v_ref(mc.numel(), 0.0f), e_prev(mc.numel(), 0.0f);
    std::uint64_t total_sent = 0;
    for (int step = 0; step < 8; ++step) {
      const auto g = normal(mc.numel(), 70 + step, 1e-2f);
      const auto v = variances(mc.numel(), 170 + step, 2e-4f);
      mc.set_gradient_variance(v);
      StepStats st;
      const Payload p = mc.compress(g, &st);
      validate(p, true);
      EXPECT_EQ(st.selected, p.count());
      EXPECT_DOUBLE_EQ(st.target_density, 0.01);
      std::vector<float> sent(mc.numel());
      const std::vector<Payload> one = {p};
      mc.aggregate(one, sent);
      const auto e = mc.flat_residual();
      std::vector<char> chosen(mc.numel(), 0);
      for (std::int32_t i : p.indices) chosen[std::size_t(i)] = 1;
      for (std::size_t i = 0; i < e.size(); ++i) {
        const float acc = g[i] + e_prev[i];
        ASSERT_EQ(sent[i] + e[i], acc) << to_string(gran) << " step " << step << " i " << i;
        // The rule, re-done here: v accumulates, resets where sent, decays by zeta elsewhere.
        v_ref[i] += v[i];
        const bool want = double(acc) * acc > alpha * double(v_ref[i]);
        ASSERT_EQ(bool(chosen[i]), want) << to_string(gran) << " step " << step << " i " << i;
        v_ref[i] = want ? 0.0f : float(double(v_ref[i]) * zeta);
        if (want) {
          ASSERT_EQ(e[i], 0.0f);
        }
      }
      total_sent += p.count();
      e_prev = e;
    }
    EXPECT_GT(total_sent, 0u);
    EXPECT_LT(total_sent, 8 * mc.numel());
  }
}

TEST(Variance, BadInputThrows) {
  EXPECT_THROW(make_compressor("variance", 0.01, options(-1.0)), gs::Error);
  EXPECT_THROW(make_compressor("variance", 0.01, options(std::nan(""))), gs::Error);
  EXPECT_THROW(make_compressor("variance", 0.01, options(1.0, 1.5)), gs::Error);
  EXPECT_THROW(make_compressor("variance", 0.01, options(1.0, -0.1)), gs::Error);

  auto c = make_compressor("variance", 0.01);
  const std::vector<float> acc = {1.0f, -2.0f, 3.0f};
  // No variance for this step.
  EXPECT_NE(gs::testing::error_message([&] { c->compress(acc, "w"); }).find("no gradient variance for 'w'"),
            std::string::npos);
  c->add_gradient_variance("w", std::vector<float>{1.0f, 1.0f, 1.0f});
  EXPECT_THROW(c->compress(acc, "other"), gs::Error);
  // Twice for one step.
  EXPECT_THROW(c->add_gradient_variance("w", std::vector<float>{1.0f, 1.0f, 1.0f}), gs::Error);
  // NaN / Inf in acc: named, nothing changes, the variance is still there for a clean retry.
  auto bad = acc;
  bad[1] = std::nanf("");
  EXPECT_NE(gs::testing::error_message([&] { c->compress(bad, "w"); }).find("'w' holds NaN or Inf"), std::string::npos);
  bad[1] = -INFINITY;
  EXPECT_THROW(c->compress(bad, "w"), gs::Error);
  EXPECT_NO_THROW(c->compress(acc, "w"));
  // The variance was used: the next compress needs a new one.
  EXPECT_THROW(c->compress(acc, "w"), gs::Error);
  // Size changes between steps, in the variance or in acc.
  EXPECT_THROW(c->add_gradient_variance("w", std::vector<float>{1.0f, 1.0f}), gs::Error);
  c->add_gradient_variance("w", std::vector<float>{1.0f, 1.0f, 1.0f});
  EXPECT_THROW(c->compress(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}, "w"), gs::Error);
  // A variance must be a finite sum of squares.
  EXPECT_THROW(c->add_gradient_variance("x", std::vector<float>{1.0f, -1.0f}), gs::Error);
  EXPECT_THROW(c->add_gradient_variance("x", std::vector<float>{1.0f, INFINITY}), gs::Error);

  // Through ModelCompressor: a step without set_gradient_variance, and a wrong size.
  ModelCompressor mc({{"a", 10}, {"b", 5}}, Granularity::layer, 0, make_compressor("variance", 0.1));
  const auto g = normal(15, 9, 1.0f);
  EXPECT_THROW(mc.compress(g), gs::Error);
  EXPECT_THROW(mc.set_gradient_variance(std::vector<float>(14, 1.0f)), gs::Error);
  mc.set_gradient_variance(std::vector<float>(15, 1.0f));
  EXPECT_NO_THROW(mc.compress(g));
  EXPECT_THROW(mc.compress(g), gs::Error);  // the variance is used by one step only
  // Compressors without the hook refuse a variance.
  ModelCompressor topk({{"a", 10}}, Granularity::layer, 0, make_compressor("topk", 0.1));
  EXPECT_THROW(topk.set_gradient_variance(std::vector<float>(10, 1.0f)), gs::Error);
}
