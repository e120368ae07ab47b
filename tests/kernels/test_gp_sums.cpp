// The CPU backend's vector GP sums (AVX2 with glibc libmvec's log1p, cpu/reduce.cpp) against its
// scalar pass (std::log1p per element) on gradient-like data, over the thetas the generalized
// Pareto fit visits: from near the bound -1/max y through tiny |theta| to large positive theta.
// Tolerances: count exact; sum_log1p, sum_inv and sum_inv2 within 1e-12 relative. libmvec's log1p
// is within a few ulp of the scalar one per element and the sums are added in another order
// (4 lanes per chunk instead of one running sum), which over a million terms of one sign stays
// orders of magnitude below 1e-12.
#include <algorithm>
#include <cmath>
#include <vector>

#include "harness.hpp"
#include "cpu/reduce.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gs::testing {
namespace {

namespace cpu = gs::kernels::cpu;

void expect_gp_near(const fitting::GpSums& got, const fitting::GpSums& ref, double rel) {
  EXPECT_EQ(got.count, ref.count);
  EXPECT_NEAR(got.sum_log1p, ref.sum_log1p, rel * std::fabs(ref.sum_log1p));
  EXPECT_NEAR(got.sum_inv, ref.sum_inv, rel * ref.sum_inv);
  EXPECT_NEAR(got.sum_inv2, ref.sum_inv2, rel * ref.sum_inv2);
}

TEST(CpuGpSums, VectorPassMatchesScalarPassOnGradientLikeData) {
  if (!cpu::detail::gp_sums_vectorized()) GTEST_SKIP() << "this build or CPU runs the scalar pass only";
  std::uint64_t seed = 300;
  // 1000003: chunks of kChunk and a tail that is not a multiple of 4.
  for (Shape shape : {Shape::laplace, Shape::student3, Shape::pareto, Shape::specials, Shape::centre_taps})
    for (std::size_t n : {std::size_t{7}, std::size_t{1000003}}) {
      const std::vector<float> g = make_data(shape, n, ++seed);
      std::vector<double> finite;
      for (float v : g)
        if (std::isfinite(v)) finite.push_back(std::fabs(double(v)));
      std::sort(finite.begin(), finite.end());
      if (finite.empty()) continue;
      // Thresholds as the fits use them: every value, the median, the top 0.1%.
      for (double t : {0.0, finite[finite.size() / 2], finite[finite.size() * 999 / 1000]}) {
        const double shift = t, ymax = finite.back() - shift;
        if (!(ymax > 0.0)) continue;
        double ymean = 0.0;
        std::size_t above = 0;
        for (double x : finite)
          if (x > t) ymean += x - shift, ++above;
        ymean /= double(above);
        std::vector<double> thetas{-1.0 / ymax * (1.0 - 1e-9), -0.5 / ymax, 0.0};
        for (int e = -12; e <= 16; e += 4) thetas.push_back(std::pow(10.0, 0.5 * e) / ymean);
        for (double theta : thetas) {
          SCOPED_TRACE(std::string(shape_name(shape)) + " n=" + std::to_string(n) + " t=" + std::to_string(t) +
                       " theta=" + std::to_string(theta));
          expect_gp_near(cpu::gp_sums(g, theta, t, shift), cpu::detail::gp_sums_scalar(g, theta, t, shift), 1e-12);
        }
      }
    }
}

TEST(CpuGpSums, ScalarPassKeepsItsChecks) {
  const std::vector<float> g{1.0f, 2.0f};
  EXPECT_THROW(cpu::detail::gp_sums_scalar(g, std::nan(""), 0.0, 0.0), gs::Error);
  EXPECT_THROW(cpu::detail::gp_sums_scalar(g, 1.0, std::nan(""), 0.0), gs::Error);
  EXPECT_EQ(cpu::detail::gp_sums_scalar(g, 1.0, 0.0, 0.0).count, 2u);
}

#if defined(_OPENMP)
TEST(CpuGpSums, SameBitsForOneAndTwoThreads) {
  const std::vector<float> g = make_data(Shape::student3, 1000007, 78);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const fitting::GpSums a = cpu::gp_sums(g, 25.0, 1e-3, 1e-3);
  omp_set_num_threads(2);
  const fitting::GpSums b = cpu::gp_sums(g, 25.0, 1e-3, 1e-3);
  omp_set_num_threads(before);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.sum_log1p, b.sum_log1p);
  EXPECT_EQ(a.sum_inv, b.sum_inv);
  EXPECT_EQ(a.sum_inv2, b.sum_inv2);
}
#endif

}  // namespace
}  // namespace gs::testing
