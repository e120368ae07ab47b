// Real FFT engines (gs/kernels/fft.hpp): the CPU engine (FFTW3) against a direct DFT in double,
// the round trip, batches of every length kind (1, 2, odd, even, prime, power of two), the size
// checks; the CUDA engine (cuFFT) against the same direct DFT when a GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "gs/base/error.hpp"
#include "gs/kernels/fft.hpp"
#include "harness.hpp"

namespace gs::testing {
namespace {

using gs::kernels::BackendKind;
using gs::kernels::RealFft;

// Direct DFT of each chunk, in double: bins(len) complex values per chunk, (re, im) interleaved.
std::vector<double> dft(std::span<const float> x, std::uint64_t len) {
  const std::uint64_t batch = x.size() / len, m = RealFft::bins(len);
  std::vector<double> out(2 * batch * m, 0.0);
  for (std::uint64_t c = 0; c < batch; ++c)
    for (std::uint64_t k = 0; k < m; ++k) {
      double re = 0, im = 0;
      for (std::uint64_t t = 0; t < len; ++t) {
        // (k t) mod len keeps the angle exact for long chunks.
        const double a = -2.0 * std::numbers::pi * double((k * t) % len) / double(len);
        re += double(x[c * len + t]) * std::cos(a);
        im += double(x[c * len + t]) * std::sin(a);
      }
      out[2 * (c * m + k)] = re;
      out[2 * (c * m + k) + 1] = im;
    }
  return out;
}

double l1(std::span<const float> x, std::size_t from, std::size_t count) {
  double s = 0;
  for (std::size_t i = from; i < from + count; ++i) s += std::fabs(double(x[i]));
  return s;
}

struct FftCase {
  std::uint64_t len, batch;
};
const FftCase kCases[] = {{1, 1}, {1, 4}, {2, 3}, {3, 2}, {8, 1}, {17, 3}, {64, 2}, {1000, 2}, {4096, 3}, {4099, 1}};

#define GS_REQUIRE_CPU_FFT() \
  if (!gs::kernels::real_fft_available(BackendKind::cpu)) GTEST_SKIP() << "this build lacks FFTW3"

TEST(RealFft, CpuMatchesDirectDftAndRoundTrips) {
  GS_REQUIRE_CPU_FFT();
  auto fft = gs::kernels::make_real_fft(BackendKind::cpu);
  EXPECT_EQ(fft->kind(), BackendKind::cpu);
  for (const auto& k : kCases) {
    const auto x = make_data(Shape::laplace, k.len * k.batch, 100 + k.len);
    const std::uint64_t m = RealFft::bins(k.len);
    std::vector<float> spec(2 * k.batch * m + 16, -7.0f);  // guard tail
    fft->forward(x, k.len, std::span<float>(spec).first(2 * k.batch * m));
    for (std::size_t i = 2 * k.batch * m; i < spec.size(); ++i) ASSERT_EQ(spec[i], -7.0f);
    const auto ref = dft(x, k.len);
    for (std::uint64_t c = 0; c < k.batch; ++c) {
      // Every |X_k| is at most the chunk's L1 norm; single precision keeps the error far below.
      const double tol = 1e-5 * l1(x, c * k.len, k.len) + 1e-12;
      for (std::uint64_t j = 0; j < 2 * m; ++j)
        ASSERT_NEAR(spec[2 * c * m + j], ref[2 * c * m + j], tol)
            << "len " << k.len << " chunk " << c << " float " << j;
    }
    std::vector<float> back(k.len * k.batch);
    fft->backward(std::span<const float>(spec).first(2 * k.batch * m), k.len, back);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(double(back[i]) / double(k.len) - x[i]));
      scale = std::max(scale, std::fabs(double(x[i])));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "len " << k.len;
  }
}

TEST(RealFft, SizeChecksNameTheProblem) {
  GS_REQUIRE_CPU_FFT();
  auto fft = gs::kernels::make_real_fft(BackendKind::cpu);
  std::vector<float> x(10), spec(12), out(10);
  auto expect_error = [](auto call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const gs::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { fft->forward(x, 0, spec); }, "chunk length is 0");
  expect_error([&] { fft->forward(x, 4, spec); }, "not a whole number of chunks");
  expect_error([&] { fft->forward(x, 2, spec); }, "need 20");  // 5 chunks x 2 bins x 2 floats
  expect_error([&] { fft->backward(spec, 3, out); }, "not a whole number of chunks");
  // Nothing to do: no chunks, no spectrum.
  EXPECT_NO_THROW(fft->forward(std::span<const float>(), 8, std::span<float>()));
}

TEST(RealFft, CudaEngineRequiresAGpu) {
  if (gs::kernels::cuda_available()) {
    EXPECT_EQ(gs::kernels::make_real_fft(BackendKind::cuda)->kind(), BackendKind::cuda);
    EXPECT_TRUE(gs::kernels::real_fft_available(BackendKind::cuda));
  } else {
    EXPECT_FALSE(gs::kernels::real_fft_available(BackendKind::cuda));
    EXPECT_THROW(gs::kernels::make_real_fft(BackendKind::cuda), gs::Error);
  }
}

// cuFFT against the direct DFT (so it needs no FFTW on the GPU machine) with the same tolerance
// as the CPU engine, the round trip, and a batch of 1e6 elements (three of its chunks checked),
// with one engine reused across every length.
TEST(RealFft, CudaMatchesDirectDft) {
  if (!gs::kernels::cuda_available())
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine "
                    "(scripts/gpu-check.sh)";
  auto gpu = gs::kernels::make_real_fft(BackendKind::cuda);
  std::vector<FftCase> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({4096, 245});
  for (const auto& k : cases) {
    const auto x = make_data(Shape::student3, k.len * k.batch, 200 + k.len);
    const std::uint64_t m = RealFft::bins(k.len);
    std::vector<float> spec(2 * k.batch * m);
    gpu->forward(x, k.len, spec);
    for (std::uint64_t c : {std::uint64_t(0), k.batch / 2, k.batch - 1}) {
      const auto ref = dft(std::span<const float>(x).subspan(c * k.len, k.len), k.len);
      const double tol = 1e-5 * l1(x, c * k.len, k.len) + 1e-12;
      for (std::uint64_t j = 0; j < 2 * m; ++j)
        ASSERT_NEAR(spec[2 * c * m + j], ref[j], tol) << "len " << k.len << " chunk " << c;
    }
    std::vector<float> back(x.size());
    gpu->backward(spec, k.len, back);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(double(back[i]) / double(k.len) - x[i]));
      scale = std::max(scale, std::fabs(double(x[i])));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "len " << k.len;
  }
}

// The engine keeps 16 plans, the least recently used destroyed first, with one work area sized for
// the largest kept: 40 (length, batch) pairs of different work sizes, then the first ones again
// (made anew) in reverse order, each transform checked by its round trip and one chunk against
// the direct DFT.
TEST(RealFft, CudaPlanCacheEvictsAndStaysCorrect) {
  if (!gs::kernels::cuda_available())
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine "
                    "(scripts/gpu-check.sh)";
  auto gpu = gs::kernels::make_real_fft(BackendKind::cuda);
  const std::uint64_t lens[] = {4099, 64, 1000, 17, 8191, 256, 3, 4096, 977, 2};
  std::vector<FftCase> cases;
  for (std::uint64_t batch = 1; batch <= 4; ++batch)
    for (std::uint64_t len : lens) cases.push_back({len, batch});
  std::vector<FftCase> again(cases.rbegin() + 16, cases.rend());  // evicted by now
  cases.insert(cases.end(), again.begin(), again.end());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& k = cases[i];
    const auto x = make_data(Shape::laplace, k.len * k.batch, 300 + i);
    const std::uint64_t m = RealFft::bins(k.len);
    std::vector<float> spec(2 * k.batch * m);
    gpu->forward(x, k.len, spec);
    const std::uint64_t c = k.batch - 1;
    const auto ref = dft(std::span<const float>(x).subspan(c * k.len, k.len), k.len);
    const double tol = 1e-5 * l1(x, c * k.len, k.len) + 1e-12;
    for (std::uint64_t j = 0; j < 2 * m; ++j)
      ASSERT_NEAR(spec[2 * c * m + j], ref[j], tol) << "case " << i << ": len " << k.len << " batch " << k.batch;
    std::vector<float> back(x.size());
    gpu->backward(spec, k.len, back);
    double worst = 0, scale = 0;
    for (std::size_t e = 0; e < x.size(); ++e) {
      worst = std::max(worst, std::fabs(double(back[e]) / double(k.len) - x[e]));
      scale = std::max(scale, std::fabs(double(x[e])));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "case " << i << ": len " << k.len << " batch " << k.batch;
  }
}

}  // namespace
}  // namespace gs::testing
