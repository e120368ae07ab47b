#pragma once
// The table-driven harness of the kernels tests: random data generators (heavy- and light-tailed,
// with zeros, ties, NaN and Inf mixed in), the backends every suite is instantiated for, and each
// backend's operations behind one small interface whose outputs sit between poisoned guard
// regions (checked after every call, on the host and on the device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/types.hpp"

namespace gs::testing {

enum class Shape { normal, laplace, student3, pareto, uniform, ties, specials, centre_taps };

inline const char* shape_name(Shape s) {
  switch (s) {
    case Shape::normal:
      return "normal";
    case Shape::laplace:
      return "laplace";
    case Shape::student3:
      return "student_t3";
    case Shape::pareto:
      return "pareto";
    case Shape::uniform:
      return "uniform";
    case Shape::ties:
      return "ties";
    case Shape::specials:
      return "nan_inf_zero";
    case Shape::centre_taps:
      return "centre_taps";
  }
  return "?";
}

// Fresh signed data of a shape, seeded. "specials" mixes 1% NaN, 1% +-Inf, 5% zeros, 0.1%
// subnormals into Laplace data; "ties" draws from 50 values so many magnitudes repeat;
// "centre_taps" is the gradient of a 3x3 convolution whose input is 1x1 (ResNet's last stage on
// 28x28 images): eight values in nine exactly zero, the centre taps Laplace.
inline std::vector<float> make_data(Shape shape, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> g(n);
  std::normal_distribution<double> normal(0.0, 1e-3);
  std::exponential_distribution<double> expo(1e3);
  std::student_t_distribution<double> student(3.0);
  std::uniform_real_distribution<double> unif(-1.0, 1.0);
  std::uniform_int_distribution<int> tie(1, 50);
  std::bernoulli_distribution sign(0.5);
  for (auto& v : g) {
    const double s = sign(rng) ? 1.0 : -1.0;
    switch (shape) {
      case Shape::normal:
        v = float(normal(rng));
        break;
      case Shape::laplace:
        v = float(s * expo(rng));
        break;
      case Shape::student3:
        v = float(1e-2 * student(rng));
        break;
      case Shape::pareto:
        v = float(s * 1e-4 * std::pow(1.0 - std::uniform_real_distribution<double>(0, 1)(rng), -1.0 / 1.5));
        break;
      case Shape::uniform:
        v = float(unif(rng));
        break;
      case Shape::ties:
        v = float(s * 0.125 * tie(rng));
        break;
      case Shape::centre_taps:
        v = (&v - g.data()) % 9 == 4 ? float(s * expo(rng)) : 0.0f;
        break;
      case Shape::specials: {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        if (u < 0.01)
          v = std::numeric_limits<float>::quiet_NaN();
        else if (u < 0.015)
          v = std::numeric_limits<float>::infinity();
        else if (u < 0.02)
          v = -std::numeric_limits<float>::infinity();
        else if (u < 0.07)
          v = 0.0f;
        else if (u < 0.071)
          v = float(s * 1e-40);
        else
          v = float(s * expo(rng));
        break;
      }
    }
  }
  return g;
}

// Selection outputs as the host sees them after a call.
struct Picked {
  std::vector<std::int64_t> indices;
  std::vector<float> values;
};

constexpr std::size_t kGuard = 64;  // elements of poison on each side of an output
constexpr std::int32_t kPoisonIndex = -777;
constexpr std::uint32_t kPoisonBits = 0x7fc0dead;  // a NaN payload no kernel writes

inline float poison_float() {
  float f;
  std::memcpy(&f, &kPoisonBits, sizeof f);
  return f;
}
inline bool is_poison(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b == kPoisonBits;
}

// One backend's operations on host data (copied to the backend's memory inside each call, results
// copied back): selection outputs sit between poisoned guard regions, checked inside.
class BackendOps {
 public:
  virtual ~BackendOps() = default;
  virtual std::string name() const = 0;
  // int64 = false uses the int32 overloads.
  virtual Picked compact(std::span<const float> g, double t, std::uint64_t capacity, bool int64) = 0;
  virtual Picked topk(std::span<const float> g, std::uint64_t k, bool int64) = 0;
  virtual gs::kernels::LogHistogram histogram(std::span<const float> g, double lo, double hi, int bins) = 0;
  // The plain entry points (pointer and length) besides MagnitudePasses.
  virtual double sum(std::span<const float> g) = 0;
  virtual float kth_largest(std::span<const float> g, std::uint64_t k) = 0;
  virtual std::uint64_t count_above(std::span<const float> g, double t) = 0;
  virtual std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed) = 0;
  virtual std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                            bool* subsampled) = 0;
};

// Every backend the table-driven suites are instantiated for: cpu, cuda and cuda-host. The cuda
// cases skip, saying why, where the build has no CUDA or the machine no GPU; the cuda-host cases
// run the same pass code on the host everywhere (ctest label cuda-host).
std::vector<gs::kernels::BackendKind> all_backends();
std::string backend_param_name(const ::testing::TestParamInfo<gs::kernels::BackendKind>& info);
std::unique_ptr<BackendOps> make_ops(gs::kernels::BackendKind kind);

class BackendTest : public ::testing::TestWithParam<gs::kernels::BackendKind> {
 protected:
  void SetUp() override;
  gs::kernels::BackendKind kind() const { return GetParam(); }
};

#define GS_INSTANTIATE_FOR_BACKENDS(Suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(::gs::testing::all_backends()), \
                           ::gs::testing::backend_param_name)

}  // namespace gs::testing
