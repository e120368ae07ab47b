#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "common/random_data.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/threshold_methods.hpp"

using namespace gs::compress;

namespace {
using gs::testing::laplace;
std::vector<float> double_gamma(std::size_t n, std::uint64_t seed, float shape) {
  std::mt19937_64 rng(seed);
  std::gamma_distribution<float> d(shape, 1e-3f);
  std::bernoulli_distribution sign;
  std::vector<float> g(n);
  for (auto& v : g) v = sign(rng) ? d(rng) : -d(rng);
  return g;
}
}  // namespace

TEST(Registry, UnknownNameListsTheKnownOnes) {
  try {
    make_compressor("sidco-x", 0.01);
    FAIL() << "no error";
  } catch (const gs::Error& e) {
    const std::string msg = e.what();
    for (auto n : compressor_names()) EXPECT_NE(msg.find(std::string(n)), std::string::npos) << n;
  }
}

TEST(Registry, RatioOutsideUnitIntervalThrows) {
  for (auto name : compressor_names())
    for (double r : {0.0, -0.1, 1.5, std::nan("")}) EXPECT_THROW(make_compressor(name, r), gs::Error);
  EXPECT_NO_THROW(make_compressor("topk", 1.0));
  EXPECT_THROW(make_compressor("sidco-e", 0.01, {.stages = -1}), gs::Error);
}

TEST(Registry, EveryNameMakesItsCompressor) {
  for (auto name : compressor_names()) {
    auto c = make_compressor(name, 0.01);
    EXPECT_EQ(c->name(), name);
    const Exchange want = name == "none"                                 ? Exchange::allreduce
                          : name.starts_with("qsgd-mn") || name == "fft" ? Exchange::collective
                                                                         : Exchange::allgather;
    EXPECT_EQ(c->exchange(), want) << name;
    EXPECT_EQ(compressor_info(name).exchange, want) << name;  // the registry row says the same
  }
}

TEST(Registry, RowsAreUniqueAndDescribed) {
  std::set<std::string_view> seen;
  for (const auto& row : compressor_registry()) {
    EXPECT_TRUE(seen.insert(row.name).second) << row.name;
    EXPECT_FALSE(row.summary.empty()) << row.name;
    // A sparse selection sends elements of the input, so its density is what it aims at.
    if (row.sparse_selection) {
      EXPECT_TRUE(row.density_based) << row.name;
    }
  }
  EXPECT_TRUE(density_based("sidco-e"));
  EXPECT_FALSE(density_based("qsgd-mn"));
  EXPECT_THROW(compressor_info("sidco-x"), gs::Error);
}

// Every row of the threshold-method table is a compressor with the row's name and summary that
// sends about the density (exactly k for an exact rule), and reports the non-finite values it
// left out, on the CPU and on the CUDA backend's code run on the host.
TEST(Registry, EveryThresholdMethodIsACompressor) {
  auto g = laplace(50000, 21);
  g[10] = std::numeric_limits<float>::quiet_NaN();
  g[20] = std::numeric_limits<float>::infinity();
  for (const auto& method : gs::fitting::threshold_methods())
    for (const char* backend : {"cpu", "cuda-host"}) {
      SCOPED_TRACE(std::string(method.name) + " on " + backend);
      const CompressorInfo& row = compressor_info(method.name);
      EXPECT_EQ(row.summary, method.summary);
      EXPECT_TRUE(row.sparse_selection);
      EXPECT_TRUE(row.density_based);
      auto c = make_compressor(method.name, 0.01, {.backend = backend});
      EXPECT_EQ(c->name(), method.name);
      const auto out = c->compress(g, "w");
      const std::uint64_t k = gs::fitting::target_count(g.size(), 0.01);
      EXPECT_EQ(out.info.nonfinite, 2u);
      EXPECT_GT(out.info.selected, k / 3);
      EXPECT_LT(out.info.selected, 3 * k);
      if (method.kind == gs::fitting::ThresholdKind::exact || method.kind == gs::fitting::ThresholdKind::sidco_topk) {
        EXPECT_EQ(out.info.selected, k);
      }
      for (float v : out.payload.values) EXPECT_TRUE(std::isfinite(v));
    }
}

TEST(TopK, KeepsExactlyTheKLargest) {
  const auto g = laplace(50000, 7);
  for (double density : {0.1, 0.01, 0.001}) {
    auto c = make_compressor("topk", density);
    const auto out = c->compress(g, "w");
    const std::uint64_t k = gs::fitting::target_count(g.size(), density);
    ASSERT_EQ(out.payload.count(), k);
    EXPECT_DOUBLE_EQ(out.info.quality(), double(k) / (g.size() * density));
    std::vector<float> x(g.size());
    std::transform(g.begin(), g.end(), x.begin(), [](float v) { return std::fabs(v); });
    std::nth_element(x.begin(), x.begin() + std::ptrdiff_t(k - 1), x.end(), std::greater<>());
    const float kth = x[k - 1];
    for (std::size_t j = 0; j < out.payload.count(); ++j) {
      EXPECT_GE(std::fabs(out.payload.values[j]), kth);
      EXPECT_EQ(out.payload.values[j], g[std::size_t(out.payload.indices[j])]);
    }
  }
}

TEST(TopK, TiesStillGiveExactlyK) {
  std::vector<float> g(1000, 0.5f);
  g[3] = -2.0f;
  auto c = make_compressor("topk", 0.01);  // k = 10: one clear winner, nine of the tied
  const auto out = c->compress(g, "w");
  ASSERT_EQ(out.payload.count(), 10u);
  EXPECT_EQ(out.payload.indices[0], 0);
  EXPECT_TRUE(std::find(out.payload.indices.begin(), out.payload.indices.end(), 3) != out.payload.indices.end());
}

// sidco-topk sends what topk sends, ties and non-finite values included: the same set, found
// through a SIDCo bound instead of a radix select over everything.
TEST(SidcoTopk, SendsExactlyTopksSelection) {
  std::vector<std::vector<float>> vectors = {laplace(300000, 11), double_gamma(200000, 12, 0.4f)};
  std::vector<float> ties(5000, 0.25f);
  ties[17] = -3.0f;
  ties[4000] = std::numeric_limits<float>::quiet_NaN();
  vectors.push_back(ties);
  for (const auto& g : vectors)
    for (double density : {0.1, 0.01, 0.001, 1.0}) {
      auto exact = make_compressor("topk", density);
      auto bounded = make_compressor("sidco-topk", density);
      const auto want = exact->compress(g, "w");
      for (int call = 0; call < 2; ++call) {  // the second reuses the workspace
        const auto got = bounded->compress(g, "w");
        EXPECT_EQ(got.payload.indices, want.payload.indices) << density;
        EXPECT_EQ(got.payload.values, want.payload.values) << density;
        EXPECT_EQ(got.info.selected, want.info.selected);
        EXPECT_EQ(got.info.nonfinite, want.info.nonfinite);
      }
    }
}

TEST(RandomK, DrawsKDistinctIndices) {
  const auto g = laplace(10000, 9);
  auto c = make_compressor("randomk", 0.01, {.seed = 3});
  const auto a = c->compress(g, "w");
  const auto b = c->compress(g, "w");
  EXPECT_EQ(a.payload.count(), 100u);
  validate(a.payload, true);
  EXPECT_NE(a.payload.indices, b.payload.indices);  // fresh draw per call
  for (std::size_t j = 0; j < a.payload.count(); ++j)
    EXPECT_EQ(a.payload.values[j], g[std::size_t(a.payload.indices[j])]);
}

TEST(None, SendsEverythingDense) {
  const auto g = laplace(257, 2);
  auto c = make_compressor("none", 0.01);
  const auto out = c->compress(g, "w");
  EXPECT_EQ(out.payload.kind, PayloadKind::dense);
  EXPECT_EQ(out.payload.values, g);
  EXPECT_DOUBLE_EQ(out.info.density(), 1.0);
  // All-reduce path: the sum of two workers' codes decodes to their mean.
  Payload sum = out.payload;
  for (auto& v : sum.values) v *= 3.0f;
  std::vector<float> mean(g.size());
  c->decode_sum(sum, 2, mean);
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(mean[i], 1.5f * g[i]);
  auto topk = make_compressor("topk", 0.5);
  EXPECT_THROW(topk->decode_sum(Payload{.kind = PayloadKind::sparse, .n = 3, .indices = {}, .values = {}}, 2,
                                std::span<float>(mean.data(), 3)),
               gs::Error);
}

TEST(Aggregate, ScatterAddsAndDividesByWorkers) {
  auto c = make_compressor("topk", 0.5);
  Payload a{.n = 4, .indices = {0, 2}, .values = {1.0f, 2.0f}};
  Payload b{.n = 4, .indices = {2, 3}, .values = {4.0f, -8.0f}};
  Payload d{.n = 4, .indices = {}, .values = {}};
  const std::vector<Payload> all = {a, b, d};
  std::vector<float> out(4, 99.0f);
  c->aggregate(all, out);
  EXPECT_FLOAT_EQ(out[0], 1.0f / 3);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 2.0f);
  EXPECT_FLOAT_EQ(out[3], -8.0f / 3);
  std::vector<float> wrong(5);
  EXPECT_THROW(c->aggregate(all, wrong), gs::Error);
  EXPECT_THROW(c->aggregate({}, out), gs::Error);
}

TEST(Selection, NonFiniteValuesAreNeverSent) {
  auto g = laplace(5000, 4);
  g[10] = std::nanf("");
  g[20] = INFINITY;
  for (auto name : compressor_names()) {
    if (name == "none") continue;
    if (name == "variance") continue;  // refuses NaN/Inf with an error (test_variance.cpp)
    auto c = make_compressor(name, 0.01);
    if (c->exchange() == Exchange::collective) continue;  // exchange() only (test_quantizers.cpp)
    const auto out = c->compress(g, "w");
    EXPECT_EQ(out.info.nonfinite, 2u) << name;
    for (float v : out.payload.values) EXPECT_TRUE(std::isfinite(v)) << name;
  }
}

// Estimation quality of the threshold methods on synthetic gradients whose law they fit. SIDCo's
// goal is a mean quality in [0.8, 1.25], held here where the first law matches the data (Laplace);
// on a heavier double-gamma tail at 0.001 SIDCo-P undershoots (about 0.57 over 10 steps, while the
// stage controller is still climbing), and GaussianKSGD's normal rule overshoots Laplace data
// (about 1.67): those bands record the methods' known bias, not a goal.
struct QualityCase {
  std::string_view name;
  double density;
  int law;  // 0: Laplace, 1: double gamma (shape 0.5)
  double lo, hi;
};

class ThresholdQuality : public ::testing::TestWithParam<QualityCase> {};

TEST_P(ThresholdQuality, WithinBand) {
  const auto p = GetParam();
  const std::size_t n = 200000;
  auto c = make_compressor(p.name, p.density, {.seed = 17});
  double sum = 0.0;
  const int steps = 10;  // lets the adaptive stage controller act twice
  for (int s = 0; s < steps; ++s) {
    const auto g = p.law == 0 ? laplace(n, 1000 + s) : double_gamma(n, 1000 + s, 0.5f);
    const auto out = c->compress(g, "w");
    validate(out.payload, true);
    EXPECT_EQ(out.payload.count(), out.info.selected);
    sum += out.info.quality();
    c->end_step();
  }
  const double mean = sum / steps;
  EXPECT_GE(mean, p.lo) << p.name << " ratio " << p.density;
  EXPECT_LE(mean, p.hi) << p.name << " ratio " << p.density;
}

INSTANTIATE_TEST_SUITE_P(
    Synthetic, ThresholdQuality,
    ::testing::Values(QualityCase{"sidco-e", 0.01, 0, 0.8, 1.25}, QualityCase{"sidco-e", 0.001, 0, 0.8, 1.25},
                      QualityCase{"sidco-p", 0.01, 0, 0.8, 1.25}, QualityCase{"sidco-p", 0.001, 1, 0.5, 1.5},
                      QualityCase{"sidco-gp", 0.01, 1, 0.7, 1.4}, QualityCase{"sidco-gp", 0.001, 1, 0.7, 1.4},
                      QualityCase{"dgc", 0.01, 0, 0.6, 1.34}, QualityCase{"redsync", 0.01, 0, 0.4, 2.0},
                      QualityCase{"gaussianksgd", 0.01, 0, 0.3, 3.0}),
    [](const auto& info) {
      std::string s(info.param.name);
      for (auto& ch : s)
        if (ch == '-') ch = '_';
      return s + "_" + std::to_string(int(std::round(1.0 / info.param.density))) + "_" +
             (info.param.law == 0 ? "laplace" : "gamma");
    });

// set_density re-aims a compressor from its next call: top-k keeps the new k exactly; SIDCo's
// adaptive stages keep working against the new target; a bad density is refused and changes nothing.
TEST(SetRatio, CompressorsFollowTheNewRatio) {
  const std::size_t n = 200000;
  auto topk = make_compressor("topk", 0.25);
  const auto g = laplace(n, 7);
  EXPECT_EQ(topk->compress(g, "w").payload.count(), n / 4);
  topk->set_density(0.01);
  const auto out = topk->compress(g, "w");
  EXPECT_EQ(out.payload.count(), n / 100);
  EXPECT_EQ(out.info.target_density, 0.01);
  EXPECT_THROW(topk->set_density(0.0), gs::Error);
  EXPECT_THROW(topk->set_density(1.5), gs::Error);
  EXPECT_EQ(topk->density(), 0.01);

  for (const bool published : {true, false})
    for (std::string_view name : {"sidco-e", "sidco-gp"}) {
      SCOPED_TRACE(published ? "as published" : "with the count correction");
      auto c = make_compressor(name, 0.25, {.seed = 3, .sidco_as_published = published});
      // A geometric walk from 0.25 to 0.01 over 10 steps, then 10 steps at 0.01.
      double sum = 0.0;
      for (int s = 0; s < 20; ++s) {
        const double r = s < 10 ? 0.25 * std::pow(0.04, s / 10.0) : 0.01;
        c->set_density(r);
        const auto o = c->compress(laplace(n, 100 + s), "w");
        EXPECT_EQ(o.info.target_density, r) << name << " step " << s;
        EXPECT_GT(o.info.quality(), 0.5) << name << " step " << s;
        EXPECT_LT(o.info.quality(), 2.0) << name << " step " << s;
        if (s >= 10) sum += o.info.quality();
        // SIDCo-E fits Laplace data exactly: one stage is enough (the count the controller starts
        // at for 0.25, default_sidco_stages), and a controller still aiming at an earlier, larger
        // density would read each step as an undershoot and add stages. With the count correction
        // the stage count is default_sidco_stages at each step's density.
        if (name == "sidco-e") {
          EXPECT_EQ(o.info.stages, published ? 1 : gs::fitting::default_sidco_stages(r)) << "step " << s;
        }
        c->end_step();
      }
      EXPECT_GE(sum / 10, 0.8) << name;
      EXPECT_LE(sum / 10, 1.25) << name;
      c->set_density(1.0);  // everything finite, no estimate
      EXPECT_EQ(c->compress(g, "w").payload.count(), n);
      c->end_step();
    }
}

TEST(Dgc, NeverSendsMoreThanFourThirdsK) {
  const auto g = double_gamma(100000, 5, 0.3f);
  auto c = make_compressor("dgc", 0.001, {.seed = 2});
  for (int s = 0; s < 5; ++s) {
    const auto out = c->compress(g, "w");
    EXPECT_LE(double(out.payload.count()), 4.0 / 3.0 * gs::fitting::target_count(g.size(), 0.001) + 1);
    EXPECT_GT(out.payload.count(), 0u);
  }
}

// Every selection compressor on the cuda-host backend (the CUDA backend's pass code on the host,
// what --backend cuda runs on a GPU) sends what it sends on the CPU: the same payload for the
// exact and sampled rules, the same selection rule at a threshold equal up to the rounding of the
// sums for SIDCo; a vector already in the backend's memory (compress_resident) gives the same.
TEST(Backends, SelectionCompressorsSendTheSameOnTheCudaBackendsCode) {
  const auto g = laplace(300000, 31);
  for (auto name : compressor_names()) {
    if (!compressor_info(name).sparse_selection || name == "randomk" || name == "variance") continue;
    SCOPED_TRACE(std::string(name));
    auto cpu = make_compressor(name, 0.01, {.backend = "cpu"});
    auto dev = make_compressor(name, 0.01, {.backend = "cuda-host"});
    auto resident = make_compressor(name, 0.01, {.backend = "cuda-host"});
    ASSERT_EQ(dev->resident_backend(), gs::kernels::BackendKind::cuda_host);
    const Compressed a = cpu->compress(g, "t"), b = dev->compress(g, "t"),
                     c = resident->compress_resident(g.data(), g.size(), "t");
    EXPECT_EQ(b.payload.indices, c.payload.indices);
    EXPECT_EQ(b.info.nonfinite, a.info.nonfinite);
    if (name.starts_with("sidco-") && name != "sidco-topk") {
      EXPECT_NEAR(b.info.threshold, a.info.threshold, 1e-6 * a.info.threshold);
      for (std::size_t j = 0; j < b.payload.indices.size(); ++j)
        ASSERT_GT(std::fabs(g[std::size_t(b.payload.indices[j])]), b.info.threshold);
    } else {
      EXPECT_EQ(b.payload.indices, a.payload.indices);
      EXPECT_EQ(b.payload.values, a.payload.values);
    }
  }
  auto quantizer = make_compressor("qsgd-mn", 1.0);
  EXPECT_FALSE(quantizer->resident_backend().has_value());
  EXPECT_THROW(quantizer->compress_resident(g.data(), g.size(), "t"), gs::Error);
}
