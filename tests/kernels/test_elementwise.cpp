// The shared per-element formulas (gs/kernels/elementwise.hpp) that make backends agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gs/kernels/elementwise.hpp"

namespace gs::kernels::detail {
namespace {

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(FastLog, AbsoluteErrorBelow1e7OverAllFloatRanges) {
  // Every 101st positive finite bit pattern, subnormals included: about 21 million values.
  double worst = 0.0;
  for (std::uint32_t b = 1; b < kNonfiniteKey; b += 101) {
    const float x = from_bits(b);
    worst = std::max(worst, std::fabs(fast_log(x) - std::log(double(x))));
  }
  EXPECT_LT(worst, 1e-7);
  EXPECT_NEAR(fast_log(1.0f), 0.0, 1e-7);
  EXPECT_NEAR(fast_log(std::numeric_limits<float>::denorm_min()), -103.27892990343185, 1e-7);
}

TEST(ThresholdAsFloat, FloatComparisonEqualsDoubleComparison) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 2.0);
  for (int i = 0; i < 200000; ++i) {
    const double t = i % 3 == 0 ? double(float(u(rng))) : u(rng);  // on and between floats
    const float tf = threshold_as_float(t);
    for (float x :
         {float(t), std::nextafter(float(t), 0.0f), std::nextafter(float(t), 3.0f), tf, std::nextafter(tf, 3.0f)}) {
      ASSERT_EQ(x > tf, double(x) > t) << "t=" << t << " x=" << x;
    }
  }
  EXPECT_EQ(threshold_as_float(1e300), std::numeric_limits<float>::max());
  EXPECT_TRUE(threshold_as_float(0.0) < 0.0f || threshold_as_float(0.0) == 0.0f);
  EXPECT_FALSE(selected_above(0.0f, threshold_as_float(0.0)));
  EXPECT_FALSE(selected_above(std::numeric_limits<float>::infinity(), threshold_as_float(1.0)));
  EXPECT_FALSE(selected_above(std::nanf(""), threshold_as_float(0.0)));
  EXPECT_TRUE(selected_above(-2.0f, threshold_as_float(1.5)));
}

TEST(MagnitudeKey, OrdersLikeMagnitudes) {
  EXPECT_LT(magnitude_key(-1.0f), magnitude_key(2.0f));
  EXPECT_EQ(magnitude_key(-3.5f), magnitude_key(3.5f));
  EXPECT_GE(magnitude_key(std::numeric_limits<float>::infinity()), kNonfiniteKey);
  EXPECT_GE(magnitude_key(-std::nanf("")), kNonfiniteKey);
  EXPECT_LT(magnitude_key(std::numeric_limits<float>::max()), kNonfiniteKey);
  EXPECT_EQ(key_to_float(magnitude_key(-0.75f)), 0.75f);
}

TEST(HashToRange, IsTheHighWordOfTheProduct) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t h = rng(), n = rng() >> (i % 64);
    __extension__ const unsigned __int128 p = static_cast<unsigned __int128>(h) * n;
    ASSERT_EQ(hash_to_range(h, n), static_cast<std::uint64_t>(p >> 64));
  }
  EXPECT_NE(element_hash(1, 0), element_hash(2, 0));
  EXPECT_NE(element_hash(1, 0), element_hash(1, 1));
}

}  // namespace
}  // namespace gs::kernels::detail
