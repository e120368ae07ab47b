// Range-based float codec and the `fft` compressor (frequency-domain sparsification). The codec
// tests always run; the compressor tests skip when the build lacks FFTW3 (and then check that
// make_compressor says so).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "common/random_data.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/range_float.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"

using namespace gs::compress;

namespace {

using gs::testing::laplace;

// Laplace innovations through an AR(1) filter: a gradient-like vector whose spectrum is not flat.
std::vector<float> correlated(std::size_t n, std::uint64_t seed, float rho = 0.9f) {
  auto g = laplace(n, seed);
  for (std::size_t i = 1; i < n; ++i) g[i] += rho * g[i - 1];
  return g;
}

double rel_l2(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

bool fft_built() {
  try {
    make_compressor("fft", 0.1);
    return true;
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("FFTW3"), std::string::npos) << e.what();
    return false;
  }
}
#define REQUIRE_FFT() \
  if (!fft_built()) GTEST_SKIP() << "this build lacks FFTW3"

std::unique_ptr<Compressor> make_fft(double density, int e = 3, int m = 10, std::uint64_t chunk = 0) {
  return make_compressor("fft", density, {.fft_exponent_bits = e, .fft_mantissa_bits = m, .fft_chunk = chunk});
}

struct Solo {
  std::vector<float> sent, mean;
  Compressor::Exchanged r;
};
Solo exchange_solo(Compressor& c, std::span<const float> acc, std::string_view name = "w") {
  SoloCollectives comm;
  Solo s;
  s.sent.assign(acc.size(), NAN);
  s.mean.assign(acc.size(), NAN);
  s.r = c.exchange(acc, name, comm, s.sent, s.mean);
  return s;
}

}  // namespace

// ---- range-based floats ------------------------------------------------------------------------

TEST(RangeFloat, RoundTripIsDeterministicAndWithinTheBound) {
  // Magnitudes over about 40 binades, zeros and both signs.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> lg(-30.0, 10.0);
  std::vector<float> x(5000);
  for (auto& v : x) v = float((rng() & 1 ? 1 : -1) * std::exp2(lg(rng)));
  for (std::size_t i = 0; i < x.size(); i += 97) x[i] = 0.0f;
  for (int E : {1, 2, 3, 5, 8}) {
    for (int M : {1, 3, 7, 10, 16, 23}) {
      std::vector<std::byte> a, b;
      const RangeFloatFormat f = encode_range_floats(x, E, M, a);
      encode_range_floats(x, E, M, b);
      ASSERT_EQ(a, b);
      ASSERT_LE(f.exponent_bits, E);
      ASSERT_GE(f.mantissa_bits, M);
      ASSERT_EQ(f.exponent_bits + f.mantissa_bits, E + M);
      ASSERT_EQ(a.size(), range_float_bytes(x.size(), f));
      std::vector<float> d;
      ASSERT_EQ(decode_range_floats(a, d), a.size());
      ASSERT_EQ(d.size(), x.size());
      const double low = std::ldexp(1.0, f.min_exponent());
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(d[i], quantize_range_float(x[i], f)) << "E " << E << " M " << M << " i " << i;
        const double ax = std::fabs(double(x[i]));
        if (ax < low) {
          ASSERT_EQ(d[i], 0.0f) << "below the range flushes to zero";
        } else {
          ASSERT_LE(std::fabs(double(d[i]) - x[i]), std::ldexp(ax, -f.mantissa_bits))
              << "E " << E << " M " << M << " x " << x[i];
          ASSERT_EQ(std::signbit(d[i]), std::signbit(x[i]));
        }
      }
    }
  }
}

TEST(RangeFloat, MantissaErrorBoundIsTightAtHalfAStep) {
  // Uniform mantissas in one binade: the worst relative error approaches 2^-(M+1).
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> u(1.0f, 2.0f);
  std::vector<float> x(20000);
  for (auto& v : x) v = u(rng);
  for (int M : {2, 5, 9, 13}) {
    const auto f = choose_range_float_format(x, 1, M);
    EXPECT_EQ(f.exponent_bits, 1);
    double worst = 0;
    for (float v : x) worst = std::max(worst, std::fabs(double(quantize_range_float(v, f)) - v) / v);
    EXPECT_LE(worst, std::ldexp(1.0, -M)) << M;
    EXPECT_GT(worst, 0.4 * std::ldexp(1.0, -M)) << M;  // a bound that is not vacuous
  }
}

TEST(RangeFloat, NarrowRangesGiveSpareExponentBitsToTheMantissa) {
  const std::vector<float> three_binades = {1.0f, -3.0f, 7.9f, 2.5f};  // binades 0..2
  auto f = choose_range_float_format(three_binades, 5, 10);
  EXPECT_EQ(f.exponent_bits, 2);  // 2^2 - 1 = 3 codes cover 3 binades
  EXPECT_EQ(f.mantissa_bits, 13);
  EXPECT_EQ(f.max_exponent, 2);
  f = choose_range_float_format(three_binades, 8, 23);  // no room: FP32 mantissa is 23 bits
  EXPECT_EQ(f.exponent_bits, 8);
  f = choose_range_float_format(std::vector<float>{0.0f, 0.0f}, 3, 10);
  EXPECT_EQ(f.exponent_bits, 1);
  for (float v : {0.0f, -0.0f}) EXPECT_EQ(quantize_range_float(v, f), 0.0f);
}

TEST(RangeFloat, DocumentedBitLayout) {
  // 1.5 = 2^0 * 1.5 and -0.75 = -2^-1 * 1.5 span two binades: with E = 2, M = 3 asked, E stays 2
  // (3 codes), M = 3, emax = 0. Codes (sign | exponent code | mantissa), 6 bits each:
  // 1.5 -> 0 | 3 | 4 = 28, -0.75 -> 1 | 2 | 4 = 52, packed LSB first: 0x1C, 0x0D.
  std::vector<std::byte> out;
  const auto f = encode_range_floats(std::vector<float>{1.5f, -0.75f}, 2, 3, out);
  EXPECT_EQ(f.exponent_bits, 2);
  EXPECT_EQ(f.mantissa_bits, 3);
  const std::vector<std::uint8_t> expect = {2, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x1C, 0x0D};
  ASSERT_EQ(out.size(), expect.size());
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(std::uint8_t(out[i]), expect[i]) << i;
}

TEST(RangeFloat, TopOfTheRangeDoesNotOverflow) {
  const std::vector<float> x = {std::nextafter(2.0f, 0.0f), 1.0f};
  const auto f = choose_range_float_format(x, 1, 3);
  EXPECT_EQ(f.max_exponent, 0);
  EXPECT_EQ(f.mantissa_bits, 3);
  const float q = quantize_range_float(x[0], f);
  EXPECT_EQ(q, 1.875f);  // the largest code, not 2.0
  EXPECT_LE(std::fabs(q - x[0]) / x[0], std::ldexp(1.0, -3));
}

TEST(RangeFloat, BadInputThrows) {
  std::vector<std::byte> out;
  const std::vector<float> ok = {1.0f};
  for (auto [e, m] : {std::pair{0, 10}, {9, 10}, {3, 0}, {3, 24}})
    EXPECT_THROW(encode_range_floats(ok, e, m, out), gs::Error) << e << " " << m;
  EXPECT_THROW(encode_range_floats(std::vector<float>{1.0f, NAN}, 3, 10, out), gs::Error);
  EXPECT_THROW(encode_range_floats(std::vector<float>{INFINITY}, 3, 10, out), gs::Error);
  out.clear();
  encode_range_floats(laplace(100, 1), 3, 10, out);
  std::vector<float> d;
  EXPECT_THROW(decode_range_floats(std::span(out).first(out.size() - 1), d), gs::Error);
  EXPECT_THROW(decode_range_floats(std::span(out).first(5), d), gs::Error);
  out[0] = std::byte(9);  // exponent bits
  EXPECT_THROW(decode_range_floats(out, d), gs::Error);
}

// ---- the fft compressor --------------------------------------------------------------------------

TEST(Fft, RegisteredAndCollective) {
  const auto names = compressor_names();
  const bool listed = std::find(names.begin(), names.end(), "fft") != names.end();
  EXPECT_EQ(listed, fft_built()) << "listed exactly when make_compressor accepts it";
  REQUIRE_FFT();
  auto c = make_fft(0.01);
  EXPECT_EQ(c->name(), "fft");
  EXPECT_EQ(c->exchange(), Exchange::collective);
  EXPECT_TRUE(c->error_feedback());
}

TEST(Fft, SparseSpectrumIsReconstructedToFloatPrecision) {
  REQUIRE_FFT();
  const std::size_t L = 1024, chunks = 4;  // 513 bins a chunk
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<int> bin(1, int(L / 2) - 1);
  std::uniform_real_distribution<double> amp(0.5, 2.0), phase(0.0, 2 * std::numbers::pi);
  for (int K : {1, 5, 19}) {
    std::vector<float> x(L * chunks, 0.0f);
    for (std::size_t c = 0; c < chunks; ++c) {
      std::vector<int> bins;
      while (int(bins.size()) < K) {
        const int b = bin(rng);
        if (std::find(bins.begin(), bins.end(), b) == bins.end()) bins.push_back(b);
      }
      for (int b : bins) {
        const double a = amp(rng) * 1e-3, p = phase(rng);
        for (std::size_t t = 0; t < L; ++t)
          x[c * L + t] += float(a * std::cos(2 * std::numbers::pi * b * double(t) / L + p));
      }
    }
    // density 0.01: theta = 0.04 at step 0 keeps floor(0.04 * 513) = 20 >= K bins a chunk.
    auto full = make_fft(0.01, 8, 23, L);
    const Solo s = exchange_solo(*full, x);
    EXPECT_LT(rel_l2(s.sent, x), 2e-6) << "K " << K;
    // re and im of 20 bins in each of 4 chunks (one value for DC or Nyquist, if kept).
    EXPECT_LE(s.r.info.selected, 4u * 20u * 2u);
    EXPECT_GE(s.r.info.selected, 4u * (20u * 2u - 2u));
    // 10 mantissa bits: error set by the mantissa. 5 exponent bits cover 31 binades, so no part
    // of a kept coefficient flushes to zero (with 3, re or im parts below max/64 would).
    auto coarse = make_fft(0.01, 5, 10, L);
    EXPECT_LT(rel_l2(exchange_solo(*coarse, x).sent, x), std::ldexp(1.0, -10)) << "K " << K;
  }
  // Keeping fewer bins than the spectrum has loses energy: the check above can fail.
  std::vector<float> x(L, 0.0f);
  for (int b = 1; b <= 40; ++b)
    for (std::size_t t = 0; t < L; ++t) x[t] += float(std::cos(2 * std::numbers::pi * 7 * b * double(t) / L));
  auto c = make_fft(0.01, 8, 23, L);
  EXPECT_GT(rel_l2(exchange_solo(*c, x).sent, x), 0.3);
}

TEST(Fft, ErrorFallsAsKeptFractionAndMantissaGrow) {
  REQUIRE_FFT();
  const auto g = correlated(20000, 31);  // chunks of 4096 and a tail of 3616
  double prev = INFINITY;
  for (double density : {0.01, 0.03, 0.1, 0.25}) {  // theta = 4 density at step 0, 1 for 0.25
    auto c = make_fft(density, 5, 16);
    const double err = rel_l2(exchange_solo(*c, g).sent, g);
    EXPECT_LT(err, prev) << density;
    prev = err;
  }
  EXPECT_LT(prev, std::ldexp(1.0, -16));  // everything kept: quantization only
  prev = INFINITY;
  for (int m : {2, 4, 8, 12, 16}) {
    auto c = make_fft(0.25, 5, m);  // every bin kept: the error is quantization alone
    const double err = rel_l2(exchange_solo(*c, g).sent, g);
    EXPECT_LT(err, prev) << m;
    EXPECT_LE(err, std::ldexp(1.0, -m)) << m;  // each coefficient within 2^-m, Parseval
    prev = err;
  }
}

TEST(Fft, ThetaDecreasesToTheRatioAndSetsTheDensity) {
  REQUIRE_FFT();
  const auto g = laplace(50000, 41);
  auto c = make_fft(0.02);
  double prev = 1.0;
  for (int step = 0; step <= 260; ++step) {
    if (step % 20 == 0 || step == 199 || step == 200) {
      const Solo s = exchange_solo(*c, g);
      const double theta = s.r.info.target_density;
      if (step == 0) {
        EXPECT_DOUBLE_EQ(theta, 0.08);
      }
      if (step >= 200) {
        EXPECT_DOUBLE_EQ(theta, 0.02);
      }
      EXPECT_LE(theta, prev) << step;
      EXPECT_GT(theta, 0.02 - 1e-12);
      // Values sent per element: 2 per kept bin (DC/Nyquist 1), about theta.
      EXPECT_NEAR(s.r.info.density(), theta, 0.002 + 0.05 * theta) << step;
      prev = theta;
    }
    c->end_step();
  }
}

TEST(Fft, WireBytesAreWhatTheAllGatherCarries) {
  REQUIRE_FFT();
  struct Recording final : SoloCollectives {
    std::uint64_t bytes = 0;
    std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
      bytes += mine.size();
      return SoloCollectives::allgather(mine);
    }
  } comm;
  const auto g = laplace(30000, 51);
  auto c = make_fft(0.01, 3, 10);
  std::vector<float> sent(g.size()), mean(g.size());
  const auto r = c->exchange(g, "w", comm, sent, mean);
  EXPECT_EQ(r.wire_bytes, comm.bytes);
  // 14 bits a value plus Rice-coded bin gaps: well under top-k's 8 bytes per value sent.
  EXPECT_LT(double(r.wire_bytes), 3.0 * double(r.info.selected));
  EXPECT_EQ(sent, mean);  // one worker: the mean is its own contribution
}

// The header names the transform engine: an encoding made by the other engine (here forged by
// flipping that field on the way back from the all-gather) is refused, naming both engines, instead
// of being summed with this worker's roundings.
TEST(Fft, AnotherEnginesEncodingIsRefused) {
  REQUIRE_FFT();
  struct Forging final : SoloCollectives {
    std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
      auto all = SoloCollectives::allgather(mine);
      all[0][2] = std::byte{1};  // engine code: cuFFT
      return all;
    }
  } comm;
  const auto g = laplace(5000, 52);
  auto c = make_fft(0.1);
  std::vector<float> sent(g.size()), mean(g.size());
  try {
    c->exchange(g, "w", comm, sent, mean);
    FAIL() << "no error";
  } catch (const gs::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuFFT"), std::string::npos) << what;
    EXPECT_NE(what.find("FFTW3"), std::string::npos) << what;
    EXPECT_NE(what.find("--backend"), std::string::npos) << what;
  }
}

TEST(Fft, WorkersAgreeOnTheMeanOfWhatTheySent) {
  REQUIRE_FFT();
  const int workers = 3;
  const std::size_t n = 10000;  // chunks 4096, 4096 and a tail of 1808
  std::vector<std::vector<float>> acc, sent(workers), mean(workers);
  for (int r = 0; r < workers; ++r) acc.push_back(correlated(n, 60 + std::uint64_t(r)));
  run_workers(workers, [&](Collectives& comm) {
    const auto r = std::size_t(comm.rank());
    auto c = make_fft(0.05);
    sent[r].assign(n, NAN);
    mean[r].assign(n, NAN);
    c->exchange(acc[r], "layer", comm, sent[r], mean[r]);
  });
  std::vector<float> avg(n, 0.0f);
  for (int r = 0; r < workers; ++r)
    for (std::size_t i = 0; i < n; ++i) avg[i] += sent[std::size_t(r)][i] / workers;
  for (int r = 1; r < workers; ++r) EXPECT_EQ(mean[std::size_t(r)], mean[0]) << "worker " << r;
  EXPECT_LT(rel_l2(mean[0], avg), 1e-6);  // linear transform: float rounding only
  for (int r = 0; r < workers; ++r) EXPECT_GT(rel_l2(sent[std::size_t(r)], avg), 0.1);
}

TEST(Fft, ErrorFeedbackKeepsWhatWasNotSent) {
  REQUIRE_FFT();
  const std::vector<TensorSpec> model = {{"conv", 9000}, {"fc", 5000}};
  ModelCompressor mc(model, Granularity::layer, 0, make_fft(0.02));
  SoloCollectives comm;
  std::vector<float> e(mc.numel(), 0.0f), out(mc.numel());
  for (int step = 0; step < 3; ++step) {
    const auto g = correlated(mc.numel(), 70 + std::uint64_t(step));
    StepStats st;
    mc.step(g, comm, out, &st);  // one worker: out is what it sent
    EXPECT_GT(st.bytes_sent, 0u);
    const auto res = mc.flat_residual();
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double acc = double(g[i]) + e[i];
      worst = std::max(worst, std::fabs(double(res[i]) + out[i] - acc));
      scale = std::max(scale, std::fabs(acc));
    }
    EXPECT_LE(worst, 1e-6 * scale) << "step " << step;  // residual = acc - sent, in float
    EXPECT_GT(rel_l2(res, g), 0.1);                     // the residual carries real mass
    e = res;
  }
}

TEST(Fft, BadInputThrows) {
  if (!fft_built()) {
    EXPECT_THROW(make_compressor("fft", 0.1), gs::Error);
    GTEST_SKIP() << "this build lacks FFTW3";
  }
  for (auto [e, m] : {std::pair{0, 10}, {9, 10}, {3, 0}, {3, 24}})
    EXPECT_THROW(make_fft(0.1, e, m), gs::Error) << e << " " << m;
  EXPECT_THROW(make_fft(0.1, 3, 10, std::uint64_t(1) << 31), gs::Error);
  auto c = make_fft(0.1);
  auto g = laplace(5000, 81);
  EXPECT_THROW(c->compress(g, "w"), gs::Error);
  g[123] = NAN;
  try {
    exchange_solo(*c, g, "conv1.weight");
    FAIL() << "no error";
  } catch (const gs::Error& err) {
    EXPECT_NE(std::string(err.what()).find("conv1.weight"), std::string::npos) << err.what();
  }
  g[123] = -INFINITY;
  EXPECT_THROW(exchange_solo(*c, g), gs::Error);
  EXPECT_THROW(exchange_solo(*c, std::vector<float>{}), gs::Error);
  auto chunked = make_fft(0.1, 3, 10, 8192);
  EXPECT_NO_THROW(exchange_solo(*chunked, laplace(5000, 82)));  // n < chunk: one chunk of n
  EXPECT_NO_THROW(exchange_solo(*make_fft(0.1, 3, 10, 5000), laplace(5000, 83)));
  SoloCollectives comm;
  const auto ok = laplace(100, 84);
  std::vector<float> small(99), full(100);
  EXPECT_THROW(c->exchange(ok, "w", comm, small, full), gs::Error);
  // Workers that disagree on the tensor's size fail with an error, not a hang.
  EXPECT_THROW(run_workers(2,
                           [&](Collectives& w) {
                             auto f = make_fft(0.1);
                             const auto v = laplace(w.rank() == 0 ? 4000 : 4100, 85);
                             std::vector<float> s(v.size()), m(v.size());
                             f->exchange(v, "w", w, s, m);
                           }),
               gs::Error);
}

// The cuFFT engine (backend cuda) in the compressor, on a vector with a full-chunk batch and a
// tail chunk: one worker's mean is what it sent and keeps most of a correlated vector; where the
// build has FFTW3 too, it decodes like the CPU engine (the kept bins can differ only at near-ties
// of |X_k|, so the two agree far closer than either is to g). Without a GPU, backend cuda is
// refused with a gs::Error that names the compressor.
TEST(Fft, CudaBackendMatchesCpu) {
  if (!gs::kernels::cuda_available()) {
    try {
      make_compressor("fft", 0.1, {.backend = "cuda"});
      ADD_FAILURE() << "backend cuda accepted without a usable GPU";
    } catch (const gs::Error& e) {
      EXPECT_NE(std::string(e.what()).find("compressor 'fft'"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine";
  }
  const auto g = correlated(5 * 4096 + 1234, 91);
  auto gpu = make_compressor("fft", 0.1, {.backend = "cuda"});
  const Solo b = exchange_solo(*gpu, g);
  EXPECT_EQ(b.sent, b.mean);
  const double err = rel_l2(b.mean, g);
  EXPECT_GT(err, 1e-3);  // a real compression
  EXPECT_LT(err, 0.5);   // an AR(1) vector's energy sits in few bins
  if (!fft_built()) GTEST_SKIP() << "this build lacks FFTW3: no CPU engine to compare with";
  auto cpu = make_compressor("fft", 0.1, {.backend = "cpu"});
  const Solo a = exchange_solo(*cpu, g);
  // Values, not bins: a near-tie may swap a one-value DC/Nyquist bin for a two-value one.
  EXPECT_NEAR(double(a.r.info.selected), double(b.r.info.selected), 4.0);
  EXPECT_LT(rel_l2(b.mean, a.mean), 0.01 * err);
}
