// Unbiased all-reduce quantizers (qsgd-mn, -ts, -ms): error bound, unbiasedness, agreement between
// workers (same scale, same level, identical mean), the int8/packed/int32 sum choice, bad inputs, and
// ModelCompressor::step with a collective compressor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "common/random_data.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {

const std::vector<std::string_view> kQuantizers = {"qsgd-mn", "qsgd-mn-ts", "qsgd-mn-ms"};

// The scales each quantizer uses with default options (s_k = 2^b_k - 1).
std::vector<double> default_scales(std::string_view name) {
  const std::vector<int> bits = name == "qsgd-mn"      ? std::vector<int>{4}
                                : name == "qsgd-mn-ts" ? std::vector<int>{6, 10}
                                                       : std::vector<int>{4, 6, 8, 10};
  std::vector<double> s;
  for (int b : bits) s.push_back(double((1 << b) - 1));
  return s;
}

std::vector<float> laplace(std::size_t n, std::uint64_t seed, float scale = 1e-2f) {
  return gs::testing::laplace(n, seed, scale);
}

float max_abs(std::span<const float> g) {
  float m = 0.0f;
  for (float v : g) m = std::max(m, std::fabs(v));
  return m;
}

// The level rule of algorithms.md section 8 for one worker: the finest k with ceil(a s_k) <= s_1.
std::size_t own_level(float g, double m, const std::vector<double>& s) {
  const double a = double(std::fabs(g)) / m;
  std::size_t k = 0;
  while (k + 1 < s.size() && std::ceil(a * s[k + 1]) <= s[0]) ++k;
  return k;
}

bool is_multiple(double x, double step) {
  const double c = x / step;
  return std::fabs(c - std::round(c)) < 1e-3;
}

// The code sum's bytes for n codes in [-s1, s1] from `workers` workers (algorithms.md section 8 and
// docs/compressors.md): the fewest bytes among int8 (when workers * s1 <= 127), int64 words of
// floor(63 / L) lanes of L bits (the offset codes' sum needs 2 workers s1 < 2^L), and int32; ties
// go to int8 or int32.
std::uint64_t sum_bytes(std::size_t n, int workers, double s1) {
  int lane = 1;
  while (std::ldexp(1.0, lane) <= 2.0 * workers * s1) ++lane;
  const std::size_t lanes = std::size_t(63 / lane), packed = 8 * ((n + lanes - 1) / lanes);
  if (workers * s1 <= 127 && n <= packed) return n;
  return packed < 4 * n ? packed : 4 * n;
}

// The level round's bytes for n elements and `levels` scales: int8 MIN indices, or thermometer bits
// [level >= j], j = 1..levels-1, summed in lanes of bit_width(workers) bits, floor(63 / lane) to an
// int64 word, when those take fewer bytes.
std::uint64_t level_bytes(std::size_t n, int workers, std::size_t levels) {
  if (levels < 2) return 0;
  int lane = 0;
  while ((1 << lane) <= workers) ++lane;
  const std::size_t lanes = std::size_t(63 / lane), values = n * (levels - 1);
  const std::size_t thermometer = 8 * ((values + lanes - 1) / lanes);
  return thermometer < n ? thermometer : n;
}

}  // namespace

TEST(Quantizers, RegisteredAsCollectiveWithoutErrorFeedback) {
  for (auto name : kQuantizers) {
    auto c = make_compressor(name, 0.01);  // the density is checked but unused
    EXPECT_EQ(c->name(), name);
    EXPECT_EQ(c->exchange(), Exchange::collective);
    EXPECT_FALSE(c->error_feedback());
    EXPECT_EQ(c->density(), 1.0);
    const std::vector<float> g = {1.0f, 2.0f};
    EXPECT_THROW(c->compress(g, "w"), gs::Error);  // only exchange() makes sense
  }
}

// One worker: each decoded element is within one step of g (M/s at its level, <= M/s_1); elements
// small enough for the finest level get its step; codes are integers at that step; mean == sent.
TEST(Quantizers, OneWorkerErrorWithinOneStep) {
  const auto g = laplace(20000, 3);
  const double m = max_abs(g);
  for (auto name : kQuantizers) {
    const auto s = default_scales(name);
    auto c = make_compressor(name, 1.0, {.seed = 11});
    SoloCollectives solo;
    std::vector<float> sent(g.size()), mean(g.size());
    const auto r = c->exchange(g, "fc1.weight", solo, sent, mean);
    EXPECT_EQ(r.info.n, g.size());
    EXPECT_EQ(r.info.selected, g.size());
    EXPECT_EQ(r.info.density(), 1.0);
    EXPECT_EQ(r.info.quality(), 1.0);
    // Rounds: MAX (4 bytes), the levels when several scales (one worker: 1-bit thermometer lanes,
    // 63 a word), SUM (packed: one worker's offset codes fit 5 bits for s_1 = 15, 7 bits for
    // s_1 = 63: 12 or 9 lanes per int64).
    const std::size_t lanes = s[0] == 15 ? 12 : 9;
    EXPECT_EQ(sum_bytes(g.size(), 1, s[0]), 8 * ((g.size() + lanes - 1) / lanes));
    EXPECT_EQ(level_bytes(g.size(), 1, s.size()), s.size() == 1 ? 0 : 8 * ((g.size() * (s.size() - 1) + 62) / 63));
    EXPECT_EQ(r.wire_bytes, 4 + level_bytes(g.size(), 1, s.size()) + sum_bytes(g.size(), 1, s[0])) << name;
    std::size_t finer = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const std::size_t k = own_level(g[i], m, s);
      finer += k > 0;
      const double step = m / s[k];
      ASSERT_LE(std::fabs(double(sent[i]) - g[i]), step * (1 + 1e-6)) << name << " i " << i;
      ASSERT_TRUE(is_multiple(sent[i], step)) << name << " i " << i;
      ASSERT_EQ(sent[i], mean[i]);
    }
    if (s.size() > 1) {
      EXPECT_GT(finer, g.size() / 4) << name << ": Laplace data is mostly small";
    }
  }
}

// E[decoded] = g: the mean of K independent draws is within Hoeffding's bound of g. Each draw lies
// in an interval of length step (step = M/s_1 at most), so P(|avg - g_i| >= t) <= 2 exp(-2 K t^2 /
// step^2); t = step sqrt(ln(2n/1e-6) / (2K)) keeps the chance of any false failure below 1e-6.
TEST(Quantizers, OneWorkerIsUnbiased) {
  const std::size_t n = 200, draws = 4000;
  const auto g = laplace(n, 21);
  const double m = max_abs(g);
  for (auto name : kQuantizers) {
    const auto s = default_scales(name);
    auto c = make_compressor(name, 1.0, {.seed = 5});
    SoloCollectives solo;
    std::vector<double> sum(n, 0.0);
    std::vector<float> sent(n), mean(n);
    for (std::size_t d = 0; d < draws; ++d) {
      c->exchange(g, "w", solo, sent, mean);
      for (std::size_t i = 0; i < n; ++i) sum[i] += sent[i];
    }
    const double t = m / s[0] * std::sqrt(std::log(2.0 * n / 1e-6) / (2.0 * draws));
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(sum[i] / draws - g[i]));
    EXPECT_LE(worst, t) << name;
    // Deterministic rounding to nearest would be off by up to step/2 = 10+ times t.
    EXPECT_LT(t, 0.1 * m / s[0]);
  }
}

// Two workers: the mean over draws of the all-reduced mean converges to the mean of the workers'
// g. Each draw's mean is (X_0 + X_1)/2 with each X_w in an interval of length step, so Hoeffding
// gives P(|avg - mu_i| >= t) <= 2 exp(-4 K t^2 / step^2).
TEST(Quantizers, TwoWorkersAreUnbiased) {
  const std::size_t n = 150, draws = 1500;
  const auto g0 = laplace(n, 31), g1 = laplace(n, 32, 3e-3f);
  const double m = std::max(max_abs(g0), max_abs(g1));
  for (auto name : kQuantizers) {
    const double s1 = default_scales(name)[0];
    std::vector<double> sum(n, 0.0);
    run_workers(2, [&](Collectives& comm) {
      auto c = make_compressor(name, 1.0, {.seed = 100 + std::uint64_t(comm.rank())});
      const auto& g = comm.rank() == 0 ? g0 : g1;
      std::vector<float> sent(n), mean(n);
      for (std::size_t d = 0; d < draws; ++d) {
        c->exchange(g, "w", comm, sent, mean);
        if (comm.rank() == 0)
          for (std::size_t i = 0; i < n; ++i) sum[i] += mean[i];
      }
    });
    const double t = m / s1 * std::sqrt(std::log(2.0 * n / 1e-6) / (4.0 * draws));
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(sum[i] / draws - 0.5 * (double(g0[i]) + g1[i])), t) << name << " i " << i;
  }
}

// 2..5 workers with different magnitudes (so their own levels differ): every worker ends with the
// same mean bit for bit, the mean is the sum of what each worker sent / W, each worker quantized at
// the level the MIN agreed on (the coarsest own level), and the wire bytes follow the sum type.
TEST(Quantizers, AllReduceCompatibleAcrossWorkers) {
  const std::size_t n = 3000;
  for (int workers = 2; workers <= 5; ++workers)
    for (auto name : kQuantizers) {
      const auto s = default_scales(name);
      std::vector<std::vector<float>> g(workers), sent(workers, std::vector<float>(n)),
          mean(workers, std::vector<float>(n));
      for (int w = 0; w < workers; ++w) g[w] = laplace(n, 1000 * workers + w, 1e-2f / (1 + 3 * w));
      std::vector<std::uint64_t> bytes(workers);
      run_workers(workers, [&](Collectives& comm) {
        const int w = comm.rank();
        auto c = make_compressor(name, 1.0, {.seed = 7 + std::uint64_t(w)});
        bytes[w] = c->exchange(g[w], "conv.weight", comm, sent[w], mean[w]).wire_bytes;
      });
      double m = 0.0;
      for (const auto& gw : g) m = std::max<double>(m, max_abs(gw));
      const std::uint64_t expect = 4 + level_bytes(n, workers, s.size()) + sum_bytes(n, workers, s[0]);
      std::size_t moved = 0;  // elements where some worker's own level was finer than the agreed one
      for (std::size_t i = 0; i < n; ++i) {
        std::size_t agreed = s.size(), finest = 0;
        for (int w = 0; w < workers; ++w) {
          agreed = std::min(agreed, own_level(g[w][i], m, s));
          finest = std::max(finest, own_level(g[w][i], m, s));
        }
        moved += finest > agreed;
        const double step = m / s[agreed];
        double total = 0.0, truth = 0.0;
        for (int w = 0; w < workers; ++w) {
          ASSERT_TRUE(is_multiple(sent[w][i], step)) << name << " W " << workers << " worker " << w;
          ASSERT_LE(std::fabs(double(sent[w][i]) - g[w][i]), step * (1 + 1e-6));
          total += sent[w][i];
          truth += g[w][i];
        }
        ASSERT_NEAR(mean[0][i], total / workers, 1e-6 * m) << name << " W " << workers;
        ASSERT_LE(std::fabs(mean[0][i] - truth / workers), step * (1 + 1e-6));
      }
      if (s.size() > 1) {
        EXPECT_GT(moved, n / 20) << name << ": the test must exercise the MIN";
      }
      for (int w = 0; w < workers; ++w) {
        EXPECT_EQ(std::memcmp(mean[w].data(), mean[0].data(), n * sizeof(float)), 0)
            << name << " W " << workers << " worker " << w;
        EXPECT_EQ(bytes[w], expect) << name << " W " << workers;
      }
    }
}

// Each sum format at its edge, with codes that would overflow a narrower one: every worker sends the
// top code +s_1 or the bottom -s_1 (|g| = M gives exactly s) at the first 40 elements, alternating,
// so a packed word holds a lane at its maximum (2 W s_1) beside a lane at 0 and any carry between
// lanes, or int8 wrap-around, would show in the mean.
TEST(Quantizers, SumFormatAtItsEdgesKeepsExtremeCodes) {
  const std::size_t n = 500;
  const std::uint64_t words = 8 * ((n + 6) / 7);  // 7 lanes per int64 word for 8- and 9-bit lanes
  struct Case {
    std::string_view name;
    std::vector<int> bits;
    int workers;
    std::uint64_t bytes;
  };
  for (const Case& k : {Case{"qsgd-mn", {}, 4, 4 + 8 * ((n + 8) / 9)},        // 120 <= 127, but 7-bit lanes beat int8
                        Case{"qsgd-mn", {}, 8, 4 + n},                        // int8: 8-bit lanes, 9.1 bits, lose
                        Case{"qsgd-mn", {}, 9, 4 + words},                    // 135 > 127: 9-bit lanes, not int32
                        Case{"qsgd-mn-ts", {}, 2, 4 + 136 + n},               // 126 <= 127: int8
                        Case{"qsgd-mn-ts", {}, 3, 4 + 136 + words},           // 189: 9-bit lanes
                        Case{"qsgd-mn", {16}, 17, 4 + 4 * n},                 // 2 x 17 x 65535 needs 22 bits: int32
                        Case{"qsgd-mn", {16}, 16, 4 + 8 * ((n + 2) / 3)}}) {  // 21 bits: 3 lanes
    ASSERT_EQ(sum_bytes(n, k.workers, k.bits.empty() ? default_scales(k.name)[0] : 65535.0),
              k.bytes - 4 - level_bytes(n, k.workers, k.name == "qsgd-mn-ts" ? 2 : 1));
    if (k.name == "qsgd-mn-ts") {
      ASSERT_EQ(level_bytes(n, k.workers, 2), 136u);  // 2-bit thermometer lanes, 31 a word
    }
    std::vector<std::vector<float>> mean(k.workers, std::vector<float>(n));
    std::vector<std::uint64_t> bytes(k.workers);
    run_workers(k.workers, [&](Collectives& comm) {
      auto g = laplace(n, 50 + comm.rank(), 1e-3f);
      for (std::size_t i = 0; i < 40; ++i) g[i] = i % 2 ? -1.0f : 1.0f;
      auto c = make_compressor(k.name, 1.0, {.seed = 3 + std::uint64_t(comm.rank()), .quant_bits = k.bits});
      std::vector<float> sent(n);
      bytes[comm.rank()] = c->exchange(g, "w", comm, sent, mean[comm.rank()]).wire_bytes;
    });
    for (int w = 0; w < k.workers; ++w) {
      EXPECT_EQ(bytes[w], k.bytes) << k.name << " x " << k.workers;
      for (std::size_t i = 0; i < 40; ++i)
        ASSERT_FLOAT_EQ(mean[w][i], i % 2 ? -1.0f : 1.0f) << k.name << " x " << k.workers << " i " << i;
    }
  }
}

TEST(Quantizers, CustomBitsAndSixteenBits) {
  const auto g = laplace(1000, 8);
  const double m = max_abs(g);
  auto c = make_compressor("qsgd-mn", 1.0, {.quant_bits = {16}});
  SoloCollectives solo;
  std::vector<float> sent(g.size()), mean(g.size());
  // One worker's offset codes up to 2 x 65535 fit 17-bit lanes, 3 to an int64 word.
  EXPECT_EQ(c->exchange(g, "w", solo, sent, mean).wire_bytes, 4 + 8 * ((g.size() + 2) / 3));
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_LE(std::fabs(sent[i] - g[i]), m / 65535 * 1.001);
  auto ms = make_compressor("qsgd-mn-ms", 1.0, {.quant_bits = {2, 4, 6, 8}});
  // Levels as 3 thermometer bits per element (63 a word), codes up to 2 x 3 in 3-bit lanes, 21 a
  // word.
  EXPECT_EQ(ms->exchange(g, "w", solo, sent, mean).wire_bytes,
            4 + 8 * ((3 * g.size() + 62) / 63) + 8 * ((g.size() + 20) / 21));
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_LE(std::fabs(sent[i] - g[i]), m / 3 * 1.001);
}

// The formats are chosen by bytes for the vector at hand: one code stays an int8 rather than fill an
// int64 word; 3 workers at (6, 10) bits send 2 codes as int32 (8 bytes either way: ties to the plain
// type) and 3 packed (8 bytes, not 12), their levels as int8 until a thermometer word is smaller.
// Every worker's mean is still the mean of what each sent.
TEST(Quantizers, TinyVectorsKeepThePlainTypes) {
  {
    auto c = make_compressor("qsgd-mn", 1.0);
    SoloCollectives solo;
    std::vector<float> g = {0.3f}, sent(1), mean(1);
    EXPECT_EQ(c->exchange(g, "b", solo, sent, mean).wire_bytes, 4u + 1u);
    EXPECT_EQ(sent[0], mean[0]);
  }
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{9}}) {
    std::vector<std::vector<float>> sent(3, std::vector<float>(n)), mean(3, std::vector<float>(n));
    std::vector<std::uint64_t> bytes(3);
    run_workers(3, [&](Collectives& comm) {
      const int w = comm.rank();
      const auto g = laplace(n, 70 + std::uint64_t(w), 1e-2f / float(1 + w));
      auto c = make_compressor("qsgd-mn-ts", 1.0, {.seed = 5 + std::uint64_t(w)});
      bytes[w] = c->exchange(g, "bias", comm, sent[w], mean[w]).wire_bytes;
    });
    const std::uint64_t codes = n <= 2 ? 4 * n : 8 * ((n + 6) / 7);
    const std::uint64_t levels = n < 8 ? n : 8 * ((n + 30) / 31);
    EXPECT_EQ(sum_bytes(n, 3, 63), codes);
    EXPECT_EQ(level_bytes(n, 3, 2), levels);
    for (int w = 0; w < 3; ++w) {
      EXPECT_EQ(bytes[w], 4 + levels + codes) << "n " << n;
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(mean[w][i], (sent[0][i] + sent[1][i] + sent[2][i]) / 3.0, 1e-7) << "n " << n;
    }
  }
}

TEST(Quantizers, ZeroAndEmptyVectors) {
  for (auto name : kQuantizers) {
    auto c = make_compressor(name, 1.0);
    std::vector<float> zeros(100, 0.0f), sent(100, 5.0f), mean(100, 5.0f);
    run_workers(3, [&](Collectives& comm) {
      std::vector<float> my_sent(100, 5.0f), my_mean(100, 5.0f);
      auto cw = make_compressor(name, 1.0);
      const auto r = cw->exchange(zeros, "w", comm, my_sent, my_mean);
      EXPECT_EQ(r.wire_bytes, 4u);  // only the MAX round: M = 0 ends the exchange
      for (std::size_t i = 0; i < 100; ++i) {
        ASSERT_EQ(my_sent[i], 0.0f);
        ASSERT_EQ(my_mean[i], 0.0f);
      }
    });
    SoloCollectives solo;
    const auto r = c->exchange({}, "w", solo, {}, {});
    EXPECT_EQ(r.wire_bytes, 0u);
    EXPECT_EQ(r.info.n, 0u);
  }
}

TEST(Quantizers, NonFiniteInputFailsOnEveryWorkerNamingTheTensor) {
  for (auto name : kQuantizers)
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      std::vector<std::string> messages(2);
      std::mutex mu;
      EXPECT_THROW(run_workers(2,
                               [&](Collectives& comm) {
                                 auto g = laplace(50, 9);
                                 if (comm.rank() == 1) g[7] = bad;
                                 auto c = make_compressor(name, 1.0);
                                 std::vector<float> sent(50), mean(50);
                                 try {
                                   c->exchange(g, "fc2.bias", comm, sent, mean);
                                 } catch (const gs::Error& e) {
                                   std::lock_guard lock(mu);
                                   messages[comm.rank()] = e.what();
                                   throw;
                                 }
                               }),
                   gs::Error);
      // Both fail on their own (not by the other's abort), and both name the tensor.
      for (const auto& msg : messages) {
        EXPECT_NE(msg.find("fc2.bias"), std::string::npos) << msg;
        EXPECT_NE(msg.find("NaN or Inf"), std::string::npos) << msg;
      }
    }
}

TEST(Quantizers, BadOptionsThrow) {
  const std::vector<std::pair<std::string_view, std::vector<int>>> bad = {
      {"qsgd-mn", {0}},        {"qsgd-mn", {17}},       {"qsgd-mn", {4, 6}},
      {"qsgd-mn-ts", {6}},     {"qsgd-mn-ts", {10, 6}}, {"qsgd-mn-ts", {6, 6}},
      {"qsgd-mn-ts", {6, 17}}, {"qsgd-mn-ms", {4}},     {"qsgd-mn-ms", {2, 4, 4, 8}},
      {"qsgd-mn-ms", {-1, 4}}};
  for (const auto& [name, bits] : bad)
    EXPECT_THROW(make_compressor(name, 1.0, {.quant_bits = bits}), gs::Error) << name;
  EXPECT_NO_THROW(make_compressor("qsgd-mn-ts", 1.0, {.quant_bits = {1, 16}}));
  auto c = make_compressor("qsgd-mn", 1.0);
  SoloCollectives solo;
  std::vector<float> g(10, 1.0f), small(9);
  EXPECT_THROW(c->exchange(g, "w", solo, small, small), gs::Error);
}

// A collective compressor through ModelCompressor::step at layer granularity: identical updates on
// every worker, wire bytes summed over the layers (2-bit thermometer levels, 9-bit packed sums
// for 3 workers at 6 bits), no
// residual, and each layer's update within one coarse step of the workers' mean gradient.
TEST(ModelCompressorStep, CollectiveQuantizerPerLayer) {
  const std::vector<TensorSpec> model = {{"fc1.weight", 3000}, {"fc1.bias", 30}, {"fc2.weight", 1500}};
  const int workers = 3;
  std::vector<std::vector<float>> grads(workers), outs(workers);
  std::vector<StepStats> stats(workers);
  std::vector<std::vector<float>> residuals(workers);
  for (int step = 0; step < 2; ++step) {
    for (int w = 0; w < workers; ++w) grads[w] = laplace(4530, 300 * step + w, 1e-3f * (w + 1));
    run_workers(workers, [&](Collectives& comm) {
      const int w = comm.rank();
      ModelCompressor mc(model, Granularity::layer, 0,
                         make_compressor("qsgd-mn-ts", 1.0, {.seed = 40 + std::uint64_t(w)}));
      outs[w].assign(mc.numel(), 0.0f);
      mc.step(grads[w], comm, outs[w], &stats[w]);
      residuals[w] = mc.flat_residual();
    });
    for (int w = 0; w < workers; ++w) {
      EXPECT_EQ(outs[w], outs[0]) << "worker " << w;
      EXPECT_EQ(stats[w].n, 4530u);
      EXPECT_EQ(stats[w].selected, 4530u);
      EXPECT_EQ(stats[w].quality(), 1.0);
      EXPECT_EQ(stats[w].group_quality.size(), 3u);
      std::uint64_t expect_bytes = 0;
      for (const auto& t : model) expect_bytes += 4 + 8 * ((t.numel + 30) / 31) + 8 * ((t.numel + 6) / 7);
      EXPECT_EQ(stats[w].bytes_sent, expect_bytes);
      EXPECT_EQ(stats[w].dense_bytes, 4 * 4530u);
      for (float e : residuals[w]) ASSERT_EQ(e, 0.0f);
    }
    std::uint64_t offset = 0;
    for (const auto& t : model) {
      double m = 0.0;
      for (int w = 0; w < workers; ++w)
        for (std::uint64_t i = offset; i < offset + t.numel; ++i) m = std::max(m, double(std::fabs(grads[w][i])));
      for (std::uint64_t i = offset; i < offset + t.numel; ++i) {
        double truth = 0.0;
        for (int w = 0; w < workers; ++w) truth += grads[w][i];
        ASSERT_LE(std::fabs(outs[0][i] - truth / workers), m / 63 * (1 + 1e-6)) << t.name;
      }
      offset += t.numel;
    }
  }
}
