// CUDA-only checks: the device buffer, the runtime's errors and the backend's name, which have no
// host twin (they are the CUDA runtime itself, not pass logic); they skip, saying why, without a
// GPU. The table-driven suites run the CUDA backend's pass logic as cuda (GPU) and cuda_host (any
// machine); the last test checks that every cuda case has its cuda_host twin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <set>
#include <string>

#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"
#include "harness.hpp"
#if defined(GS_HAVE_CUDA)
#include <cuda_runtime.h>

#include "gs/kernels/cuda.hpp"
#endif

namespace gs::testing {
namespace {

#define GS_REQUIRE_GPU()                                                                 \
  do {                                                                                   \
    if (!gs::kernels::cuda_built()) GTEST_SKIP() << "this build has no CUDA backend";    \
    if (!gs::kernels::cuda_available())                                                  \
      GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine " \
                      "(scripts/gpu-check.sh)";                                          \
  } while (0)

// Every table-driven case instantiated for cuda has a cuda_host twin of the same name (ctest -L
// cuda-host runs those on any machine): the same count, the same cases.
TEST(CudaHostSuite, CoversEveryCudaCase) {
  std::set<std::string> cuda, host;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const std::string name = std::string(suite->name()) + "." + suite->GetTestInfo(j)->name();
      const auto slash = name.rfind('/');
      if (slash == std::string::npos) continue;
      const std::string stem = name.substr(0, slash), param = name.substr(slash + 1);
      if (param == "cuda") cuda.insert(stem);
      if (param == "cuda_host") host.insert(stem);
    }
  }
  EXPECT_GE(cuda.size(), 10u);
  EXPECT_EQ(cuda, host);
}

TEST(Cuda, ResolveMatchesAvailability) {
  GS_REQUIRE_GPU();
  EXPECT_EQ(gs::kernels::resolve_backend("cuda"), gs::kernels::BackendKind::cuda);
}

#if defined(GS_HAVE_CUDA)
namespace cu = gs::kernels::cuda;

TEST(Cuda, DeviceBufferRoundTripAndMove) {
  GS_REQUIRE_GPU();
  const auto g = make_data(Shape::laplace, 4099, 1);
  cu::DeviceBuffer<float> a(g.size(), nullptr);
  a.upload(g);
  cu::DeviceBuffer<float> b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.download(), g);
}

TEST(Cuda, ErrorsBecomeGsError) {
  GS_REQUIRE_GPU();
  // An absurd allocation fails in the runtime; it must surface as DeviceError, not abort.
  try {
    cu::DeviceBuffer<float> huge(std::size_t{1} << 50, nullptr);
    ADD_FAILURE() << "a 4 PiB allocation succeeded";
  } catch (const gs::kernels::DeviceError& e) {
    EXPECT_TRUE(e.out_of_memory()) << e.what();
  }
}

// Vectors past the limits of 32-bit offsets and indices (scripts/gpu-check.sh sets GS_LARGE_N=1):
// about 6e8 elements, where CUB's histogram and selection take 64-bit offsets; 2^31 through the
// int32 overloads (the largest they take); about 2.2e9 through the int64 ones. The vector repeats
// one 2^26-element chunk, so every expected figure comes from the chunk on the host. A size whose
// data do not fit in the free device memory is skipped, and said.
TEST(CudaLarge, VectorsPastThe32BitLimits) {
  GS_REQUIRE_GPU();
  if (!std::getenv("GS_LARGE_N")) GTEST_SKIP() << "set GS_LARGE_N=1 to run (minutes, up to 10 GB of device memory)";
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 26;
  const auto chunk = make_data(Shape::laplace, kChunk, 21);
  std::vector<float> sorted(chunk.size());
  std::transform(chunk.begin(), chunk.end(), sorted.begin(), [](float v) { return std::fabs(v); });
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double t = sorted[kChunk / 2000];  // about 0.05% of the chunk above it
  const std::uint64_t above_in_chunk = gs::kernels::cpu::count_above(chunk, t);
  int ran = 0;
  for (const std::uint64_t repeats : {9u, 32u, 33u}) {
    const std::uint64_t n = repeats * kChunk;
    const bool int64 = n > (std::uint64_t{1} << 31);
    std::size_t free_bytes = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    const std::uint64_t need = 4 * n + 12 * repeats * above_in_chunk + (std::uint64_t{512} << 20);
    if (free_bytes < need) {
      std::cout << "[ SKIPPED  ] n = " << n << ": needs " << need / 1e9 << " GB, " << free_bytes / 1e9 << " GB free\n";
      continue;
    }
    SCOPED_TRACE("n = " + std::to_string(n));
    cu::DeviceBuffer<float> d(n, nullptr);
    for (std::uint64_t r = 0; r < repeats; ++r)
      cu::copy_to_device(d.data() + r * kChunk, chunk.data(), kChunk * sizeof(float), nullptr);
    const std::uint64_t expect = repeats * above_in_chunk;
    EXPECT_EQ(cu::count_above(d.data(), n, t, nullptr), expect);
    const std::uint64_t k = 1000;
    const float kth = cu::kth_largest(d.data(), n, k, nullptr);
    EXPECT_EQ(kth, sorted[(k + repeats - 1) / repeats - 1]);
    const auto check_selection = [&](auto index_type) {
      using Index = decltype(index_type);
      cu::DeviceBuffer<Index> idx(expect, nullptr);
      cu::DeviceBuffer<float> val(expect, nullptr);
      EXPECT_EQ(cu::compact_above(d.data(), n, t, idx.data(), val.data(), expect, nullptr), expect);
      const auto got = idx.download();
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
      EXPECT_GE(std::uint64_t(got.back()), (repeats - 1) * kChunk) << "the last chunk's elements are selected";
      cu::topk(d.data(), n, k, idx.data(), val.data(), nullptr);
      const auto v = val.download();
      EXPECT_TRUE(std::all_of(v.begin(), v.begin() + k, [&](float x) { return std::fabs(x) >= kth; }));
    };
    if (int64) {
      check_selection(std::int64_t{});
      EXPECT_THROW(cu::compact_above(d.data(), n, t, static_cast<std::int32_t*>(nullptr), nullptr, 0, nullptr),
                   gs::Error);
    } else {
      check_selection(std::int32_t{});
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no size fits in this device's free memory";
}
#endif

}  // namespace
}  // namespace gs::testing
