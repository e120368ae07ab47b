// Every available backend's MagnitudePasses against the naive oracle (tests/common), on fresh
// random data of many sizes and shapes. Tolerances (stated per quantity):
//   counts, zeros, non-finite, min, max, count_above, kth_largest: exact;
//   sum, sum_sq, sum_signed, GP sums: double sums in another order; the oracle's own recursive
//   summation may err by up to about n*2^-53 of the sum of |terms|, so the bound is
//   max(1e-12, 1.2e-16*n) relative to the sum of |terms|;
//   sum_log: 1e-7 per element (fast_log's bound) plus the same summation bound.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>

#include "harness.hpp"
#include "common/naive_passes.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gs::testing {
namespace {

using gs::kernels::BackendKind;

struct Case {
  Shape shape;
  std::size_t n;
};

// GS_PASSES_MAX_N=N leaves out the sizes above N (scripts/gpu-check.sh's racecheck subset).
std::vector<Case> cases() {
  const char* most = std::getenv("GS_PASSES_MAX_N");
  const std::size_t max_n = most ? std::strtoull(most, nullptr, 10) : SIZE_MAX;
  std::vector<Case> c;
  for (Shape s :
       {Shape::normal, Shape::laplace, Shape::student3, Shape::pareto, Shape::uniform, Shape::ties, Shape::specials})
    for (std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{1000}, std::size_t{131075}}) c.push_back({s, n});
  for (Shape s : {Shape::student3, Shape::specials}) c.push_back({s, 1000007});
  std::erase_if(c, [max_n](const Case& x) { return x.n > max_n; });
  return c;
}

double sum_rel(std::uint64_t n) { return std::max(1e-12, 1.2e-16 * double(n)); }

void expect_stats_near(const fitting::MagnitudeStats& got, const fitting::MagnitudeStats& ref,
                       const std::string& what) {
  SCOPED_TRACE(what);
  const double r = sum_rel(ref.count);
  EXPECT_EQ(got.count, ref.count);
  EXPECT_EQ(got.zeros, ref.zeros);
  EXPECT_EQ(got.nonfinite, ref.nonfinite);
  EXPECT_NEAR(got.sum, ref.sum, r * ref.sum + 1e-300);
  EXPECT_NEAR(got.sum_sq, ref.sum_sq, r * ref.sum_sq + 1e-300);
  EXPECT_NEAR(got.sum_signed, ref.sum_signed, r * ref.sum + 1e-300);
  EXPECT_NEAR(got.sum_log, ref.sum_log, 1e-7 * double(ref.count) + r * std::fabs(ref.sum_log));
  if (ref.count) {
    EXPECT_EQ(got.min, ref.min);
    EXPECT_EQ(got.max, ref.max);
  }
}

class PassesVsOracle : public BackendTest {};

TEST_P(PassesVsOracle, EveryPassOnEveryShapeAndSize) {
  std::uint64_t seed = 1000;
  for (const Case& c : cases()) {
    const auto g = make_data(c.shape, c.n, ++seed);
    SCOPED_TRACE(std::string(shape_name(c.shape)) + " n=" + std::to_string(c.n));
    NaivePasses naive(g);
    auto passes = gs::kernels::make_passes(g, GetParam());
    ASSERT_EQ(passes->size(), c.n);
    const fitting::MagnitudeStats ref = naive.stats();
    expect_stats_near(passes->stats(), ref, "stats");

    // Thresholds: 0, a data value itself (ties at the threshold), a double between floats, huge.
    std::vector<double> finite;
    for (float v : g)
      if (std::isfinite(v)) finite.push_back(std::fabs(double(v)));
    std::sort(finite.begin(), finite.end());
    std::vector<double> thresholds{0.0, 1e300};
    if (!finite.empty()) {
      thresholds.push_back(finite[finite.size() / 2]);
      thresholds.push_back(finite[finite.size() * 9 / 10] * (1.0 + 1e-9));
    }
    for (double t : thresholds) {
      SCOPED_TRACE("threshold " + std::to_string(t));
      EXPECT_EQ(passes->count_above(t), naive.count_above(t));
      expect_stats_near(passes->stats_above(t, t), naive.stats_above(t, t), "stats_above shift=t");
      expect_stats_near(passes->stats_above(t, 0.0), naive.stats_above(t, 0.0), "shift=0");
      const double shift = t * 1.5 + 1e-3;  // shift above the threshold: signed y
      expect_stats_near(passes->stats_above(t, shift), naive.stats_above(t, shift), "shift>t");
      for (double theta : {-0.2, 0.0, 3.0}) {
        const double th = (theta < 0 && !finite.empty()) ? theta / (finite.back() + 1.0) : theta;
        const fitting::GpSums a = passes->gp_sums(th, t, t), b = naive.gp_sums(th, t, t);
        EXPECT_EQ(a.count, b.count);
        const double r = sum_rel(b.count);
        EXPECT_NEAR(a.sum_log1p, b.sum_log1p, r * std::fabs(b.sum_log1p) + 1e-300);
        EXPECT_NEAR(a.sum_inv, b.sum_inv, r * b.sum_inv + 1e-300);
        EXPECT_NEAR(a.sum_inv2, b.sum_inv2, r * b.sum_inv2 + 1e-300);
      }
    }

    const std::uint64_t nf = finite.size();
    if (nf > 0) {
      EXPECT_EQ(passes->kth_largest(1), naive.kth_largest(1));
      for (std::uint64_t k : {nf, (nf + 1) / 2, nf / 1000 + 1})
        EXPECT_EQ(passes->kth_largest(k), finite[nf - k]) << "k=" << k;
      EXPECT_THROW(passes->kth_largest(nf + 1), gs::Error);
    }
    EXPECT_THROW(passes->kth_largest(0), gs::Error);

    // Sorted sample: everything when it fits (exactly the oracle's), a subsample otherwise.
    bool sub = true;
    const auto all = passes->sorted_sample(ref.count + 5, 7, &sub);
    EXPECT_FALSE(sub);
    EXPECT_EQ(all, naive.sorted_sample(ref.count + 5, 7, nullptr));
    if (ref.count >= 30) {
      const std::uint64_t m = ref.count / 3;
      const auto part = passes->sorted_sample(m, 11, &sub);
      EXPECT_TRUE(sub);
      ASSERT_EQ(part.size(), m);
      EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
      EXPECT_TRUE(std::includes(all.begin(), all.end(), part.begin(), part.end()));
      EXPECT_EQ(part, passes->sorted_sample(m, 11, nullptr)) << "same seed, same sample";
      EXPECT_NE(part, passes->sorted_sample(m, 12, nullptr)) << "another seed, another sample";
    }

    if (c.n > 0) {
      const auto rs = passes->random_sample(257, 5);
      ASSERT_EQ(rs.size(), 257u);
      for (float v : rs) {
        const bool in_data = std::any_of(
            g.begin(), g.end(), [v](float x) { return std::fabs(x) == v || (std::isnan(v) && std::isnan(x)); });
        EXPECT_TRUE(in_data) << v;
        if (!in_data) break;
      }
    }
  }
}

TEST_P(PassesVsOracle, EmptyVector) {
  std::vector<float> g;
  auto passes = gs::kernels::make_passes(g, GetParam());
  const fitting::MagnitudeStats s = passes->stats();
  EXPECT_EQ(s.total(), 0u);
  EXPECT_EQ(passes->count_above(0.0), 0u);
  EXPECT_EQ(passes->stats_above(0.0, 0.0).count, 0u);
  EXPECT_EQ(passes->gp_sums(0.5, 0.0, 0.0).count, 0u);
  EXPECT_THROW(passes->kth_largest(1), gs::Error);
  bool sub = true;
  EXPECT_TRUE(passes->sorted_sample(10, 1, &sub).empty());
  EXPECT_FALSE(sub);
  EXPECT_TRUE(passes->random_sample(0, 1).empty());
  EXPECT_THROW(passes->random_sample(3, 1), gs::Error);
}

TEST_P(PassesVsOracle, RandomSampleIsUniform) {
  // Values 0..999 once each: the sample mean of |g| must sit near 499.5 (sd of the mean for
  // m = 20000 draws is 288.7/sqrt(m) = 2.04; 6 sd allowed).
  std::vector<float> g(1000);
  std::iota(g.begin(), g.end(), 0.0f);
  auto passes = gs::kernels::make_passes(g, GetParam());
  const auto s = passes->random_sample(20000, 99);
  const double mean = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  EXPECT_NEAR(mean, 499.5, 6 * 2.04);
}

TEST_P(PassesVsOracle, BadArgumentsThrow) {
  const auto g = make_data(Shape::laplace, 100, 3);
  auto passes = gs::kernels::make_passes(g, GetParam());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(passes->count_above(nan), gs::Error);
  EXPECT_THROW(passes->stats_above(nan, 0.0), gs::Error);
  EXPECT_THROW(passes->stats_above(0.0, nan), gs::Error);
  EXPECT_THROW(passes->gp_sums(nan, 0.0, 0.0), gs::Error);
  EXPECT_THROW(passes->sorted_sample(0, 1, nullptr), gs::Error);
}

// The plain entry points (pointer and length) against the CPU backend's.
TEST_P(PassesVsOracle, EntryPointsMatchCpu) {
  const auto g = make_data(Shape::student3, 3000017, 2);
  const auto ops = make_ops(kind());
  namespace cpu = gs::kernels::cpu;
  EXPECT_NEAR(ops->sum(g), cpu::sum(g), 1e-12 * cpu::stats(g).sum);
  const double t = cpu::kth_largest(g, 3000);
  EXPECT_EQ(ops->kth_largest(g, 3000), float(t));
  EXPECT_EQ(ops->count_above(g, t), cpu::count_above(g, t));
  EXPECT_EQ(ops->random_sample(g, 1000, 5), cpu::random_sample(g, 1000, 5));
  bool sa = false, sb = false;
  EXPECT_EQ(ops->sorted_sample(g, 5000, 3, &sa), cpu::sorted_sample(g, 5000, 3, &sb));
  EXPECT_TRUE(sa && sb);
}

GS_INSTANTIATE_FOR_BACKENDS(PassesVsOracle);

#if defined(_OPENMP)
TEST(CpuDeterminism, SameBitsForOneAndTwoThreads) {
  const auto g = make_data(Shape::student3, 1000007, 77);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const fitting::MagnitudeStats a = gs::kernels::cpu::stats(g);
  const double ta = gs::kernels::cpu::sum(g);
  omp_set_num_threads(2);
  const fitting::MagnitudeStats b = gs::kernels::cpu::stats(g);
  const double tb = gs::kernels::cpu::sum(g);
  omp_set_num_threads(before);
  EXPECT_EQ(a.sum, b.sum);
  EXPECT_EQ(a.sum_sq, b.sum_sq);
  EXPECT_EQ(a.sum_log, b.sum_log);
  EXPECT_EQ(a.sum_signed, b.sum_signed);
  EXPECT_EQ(ta, tb);
}
#endif

TEST(Backend, ResolveNames) {
  EXPECT_EQ(gs::kernels::resolve_backend("cpu"), BackendKind::cpu);
  EXPECT_EQ(gs::kernels::resolve_backend("cuda-host"), BackendKind::cuda_host);
  EXPECT_EQ(gs::kernels::to_string(BackendKind::cuda_host), "cuda-host");
  const BackendKind a = gs::kernels::resolve_backend("auto");
  EXPECT_EQ(a, gs::kernels::cuda_available() ? BackendKind::cuda : BackendKind::cpu);
  EXPECT_THROW(gs::kernels::resolve_backend("gpu0"), gs::Error);
  if (!gs::kernels::cuda_available()) {
    try {
      gs::kernels::resolve_backend("cuda");
      ADD_FAILURE() << "resolve_backend(\"cuda\") must throw without a GPU";
    } catch (const gs::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
      EXPECT_TRUE(msg.find("no usable GPU") != std::string::npos || msg.find("no CUDA backend") != std::string::npos)
          << msg;
    }
  }
  EXPECT_EQ(gs::kernels::to_string(BackendKind::cuda), "cuda");
}

}  // namespace
}  // namespace gs::testing
