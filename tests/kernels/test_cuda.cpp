// CUDA-only checks: the device buffer, the runtime's errors and the backend's name, which have no
// host twin (they are the CUDA runtime itself, not pass logic); they skip, saying why, without a
// GPU. The table-driven suites run the CUDA backend's pass logic as cuda (GPU) and cuda_host (any
// machine); the last test checks that every cuda case has its cuda_host twin.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"
#include "harness.hpp"
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::testing {
namespace {

#define GS_REQUIRE_GPU()                                                                   \
  do {                                                                                     \
    if (!gs::kernels::cuda_built()) GTEST_SKIP() << "this build has no CUDA backend";      \
    if (!gs::kernels::cuda_available())                                                    \
      GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine "   \
                      "(scripts/gpu-check.sh)";                                            \
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
  // An absurd allocation fails in the runtime; it must surface as gs::Error, not abort.
  EXPECT_THROW(cu::DeviceBuffer<float>(std::size_t{1} << 50, nullptr), gs::Error);
}
#endif

}  // namespace
}  // namespace gs::testing
