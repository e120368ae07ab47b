// The CPU backend's sorted samples against a std::sort reference: the radix sort on float bits
// (kernels::detail::sorted_widened) and cpu::sorted_sample on both of its paths (everything, and
// the hash subsample) must give exactly the vector that widening and std::sort give, on awkward
// inputs: subnormals, FLT_MAX, many repeats, one value only, keys that differ in one radix digit
// only or share the middle ones, and 0 / -0 / NaN / +-Inf (never in a sample). Exact comparisons
// throughout.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>

#include "harness.hpp"
#include "gs/kernels/elementwise.hpp"

namespace gs::testing {
namespace {

namespace cpu = gs::kernels::cpu;
using gs::kernels::detail::sorted_widened;

constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

enum class Values {
  full_range,
  subnormal,
  repeats,
  one_value,
  low_digit,
  top_digit,
  middle_digits,
  outer_digits,
  laplace
};

const char* values_name(Values v) {
  switch (v) {
    case Values::full_range:
      return "full_range";
    case Values::subnormal:
      return "subnormal";
    case Values::repeats:
      return "repeats";
    case Values::one_value:
      return "one_value";
    case Values::low_digit:
      return "low_digit";
    case Values::top_digit:
      return "top_digit";
    case Values::middle_digits:
      return "middle_digits";
    case Values::outer_digits:
      return "outer_digits";
    case Values::laplace:
      return "laplace";
  }
  return "?";
}

// n finite floats > 0 of a kind.
std::vector<float> positive_values(Values kind, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto bits = [&](std::uint32_t lo, std::uint32_t hi) {
    return std::bit_cast<float>(std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng));
  };
  std::exponential_distribution<double> expo(1e3);
  std::vector<float> x(n);
  for (float& v : x) {
    switch (kind) {
      case Values::full_range:
        v = bits(1u, 0x7f7fffffu);
        break;  // every finite key
      case Values::subnormal:
        v = bits(1u, 0x007fffffu);
        break;  // below FLT_MIN
      case Values::repeats:
        v = std::array{kDenormMin, 0.5f, kMax}[rng() % 3];
        break;
      case Values::one_value:
        v = 3.0f;
        break;  // every digit shared
      case Values::low_digit:
        v = bits(0x3f800000u, 0x3f8000ffu);
        break;  // keys differ in bits 0-7
      case Values::top_digit:
        v = std::ldexp(1.0f, int(rng() % 200) - 100);
        break;  // exponents only
      case Values::middle_digits:
        v = bits(0x3f800000u, 0x3fbfffffu);
        break;                    // top digit shared
      case Values::outer_digits:  // bits 8-23 shared
        v = std::bit_cast<float>((std::uint32_t(1 + rng() % 0x7e) << 24) | (0x5555u << 8) | std::uint32_t(rng() % 256));
        break;
      case Values::laplace:
        v = float(expo(rng)) + kDenormMin;
        break;
    }
  }
  return x;
}

std::vector<double> reference_sorted(const std::vector<float>& x) {
  std::vector<double> r(x.begin(), x.end());
  std::sort(r.begin(), r.end());
  return r;
}

constexpr std::size_t kSizes[] = {0, 1, 2, 3, 255, 256, 257, 4099, 200003, (std::size_t{1} << 20) + 3};

TEST(SortedWidened, EqualsStdSortOnAwkwardValues) {
  std::uint64_t seed = 500;
  for (Values kind : {Values::full_range, Values::subnormal, Values::repeats, Values::one_value, Values::low_digit,
                      Values::top_digit, Values::middle_digits, Values::outer_digits, Values::laplace})
    for (std::size_t n : kSizes) {
      SCOPED_TRACE(std::string(values_name(kind)) + " n=" + std::to_string(n));
      std::vector<float> x = positive_values(kind, n, ++seed);
      const std::vector<double> want = reference_sorted(x);
      ASSERT_EQ(sorted_widened(x), want);
    }
}

TEST(SortedWidened, AlreadySortedAndReversedInputs) {
  for (std::size_t n : {std::size_t{257}, std::size_t{100000}}) {
    std::vector<float> up = positive_values(Values::full_range, n, 9);
    std::sort(up.begin(), up.end());
    std::vector<float> down(up.rbegin(), up.rend());
    const std::vector<double> want = reference_sorted(up);
    EXPECT_EQ(sorted_widened(up), want);
    EXPECT_EQ(sorted_widened(down), want);
  }
}

// Signed data with the values a sample excludes: 0, -0, NaN, +-Inf.
std::vector<float> with_specials(Values kind, std::size_t n, std::uint64_t seed) {
  std::vector<float> g = positive_values(kind, n, seed);
  std::mt19937_64 rng(seed + 1);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (float& v : g) {
    const std::uint64_t u = rng() % 100;
    if (u < 5)
      v = specials[u];
    else if (u < 50)
      v = -v;
  }
  return g;
}

bool in_sample(float v) { return std::isfinite(v) && v != 0.0f; }

// Everything: the finite non-zero |g|, widened, std::sort.
std::vector<double> reference_all(const std::vector<float>& g) {
  std::vector<double> r;
  for (float v : g)
    if (in_sample(v)) r.push_back(std::fabs(double(v)));
  std::sort(r.begin(), r.end());
  return r;
}

// The subsample's rule written plainly: the m finite non-zero elements of smallest
// (element_hash(seed, i), i), their |g| widened, std::sort.
std::vector<double> reference_subsample(const std::vector<float>& g, std::uint64_t m, std::uint64_t seed) {
  std::vector<std::tuple<std::uint64_t, std::uint64_t, double>> keyed;
  for (std::uint64_t i = 0; i < g.size(); ++i)
    if (in_sample(g[i])) keyed.emplace_back(gs::kernels::detail::element_hash(seed, i), i, std::fabs(double(g[i])));
  std::sort(keyed.begin(), keyed.end());
  std::vector<double> r;
  for (std::uint64_t k = 0; k < m; ++k) r.push_back(std::get<2>(keyed[k]));
  std::sort(r.begin(), r.end());
  return r;
}

TEST(CpuSortedSample, EverythingEqualsStdSortReference) {
  std::uint64_t seed = 700;
  for (Values kind :
       {Values::full_range, Values::subnormal, Values::repeats, Values::one_value, Values::top_digit, Values::laplace})
    for (std::size_t n : kSizes) {
      SCOPED_TRACE(std::string(values_name(kind)) + " n=" + std::to_string(n));
      const std::vector<float> g = with_specials(kind, n, ++seed);
      const std::vector<double> want = reference_all(g);
      bool sub = true;
      ASSERT_EQ(cpu::sorted_sample(g, want.size() + 1, 3, &sub), want);
      EXPECT_FALSE(sub);
      if (!want.empty()) {  // exactly max_points: still everything
        sub = true;
        ASSERT_EQ(cpu::sorted_sample(g, want.size(), 3, &sub), want);
        EXPECT_FALSE(sub);
      }
    }
}

TEST(CpuSortedSample, OnlyExcludedValuesGiveAnEmptySample) {
  const std::vector<float> g{0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  bool sub = true;
  EXPECT_TRUE(cpu::sorted_sample(g, 10, 1, &sub).empty());
  EXPECT_FALSE(sub);
}

TEST(CpuSortedSample, SubsampleEqualsItsRuleWithStdSort) {
  std::uint64_t seed = 900;
  for (Values kind : {Values::full_range, Values::subnormal, Values::repeats, Values::laplace})
    for (std::size_t n : {std::size_t{3}, std::size_t{4099}, std::size_t{200003}, (std::size_t{1} << 20) + 3}) {
      const std::vector<float> g = with_specials(kind, n, ++seed);
      const std::uint64_t available = reference_all(g).size();
      for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{2}, available / 2, available - 1}) {
        if (m == 0 || m >= available) continue;
        SCOPED_TRACE(std::string(values_name(kind)) + " n=" + std::to_string(n) + " m=" + std::to_string(m));
        bool sub = false;
        ASSERT_EQ(cpu::sorted_sample(g, m, seed, &sub), reference_subsample(g, m, seed));
        EXPECT_TRUE(sub);
      }
    }
}

}  // namespace
}  // namespace gs::testing
