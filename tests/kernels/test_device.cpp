// The CUDA backend's device policy (gs/kernels/device.hpp) driven with fake devices: which backend
// auto and cuda give, the device of the data under a guard, gradscope's stream ordered around the
// caller's, per-device properties, streams and pools made once, and how device errors are told from
// the rest. The same policy object runs over the CUDA runtime on a GPU (kernels/src/cuda/device.cu).
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gs/kernels/device.hpp"

namespace gs::testing {
namespace {

using gs::kernels::BackendKind;
using gs::kernels::CallerStream;
using gs::kernels::DeviceError;
using gs::kernels::DevicePolicy;
using gs::kernels::DeviceProperties;
using gs::kernels::DeviceScope;
using gs::kernels::StreamHandle;

DeviceProperties good_device(int sms) {
  DeviceProperties p;
  p.name = "Fake A100";
  p.major = 8;
  p.minor = 0;
  p.multiprocessors = sms;
  p.kernel_image = true;
  p.memory_pools = true;
  return p;
}

// Devices as the tests describe them; every call the policy makes is recorded.
class FakeRuntime final : public gs::kernels::DeviceRuntime {
 public:
  std::vector<DeviceProperties> devices;
  int current = 0;
  std::map<const void*, int> owner;  // device memory: pointer -> device
  bool pool_out_of_memory = false;
  std::map<int, int> property_reads, streams_made, pools_made;
  std::vector<std::pair<StreamHandle, StreamHandle>> orders;  // (waiter, signal)
  std::vector<std::uint64_t> pool_thresholds;

  int device_count() override { return int(devices.size()); }
  std::string status() override { return std::to_string(devices.size()) + " fake device(s)"; }
  DeviceProperties properties(int device) override {
    ++property_reads[device];
    return devices.at(std::size_t(device));
  }
  int current_device() override { return current; }
  void set_device(int device) override {
    if (device < 0 || device >= device_count()) throw std::logic_error("set_device out of range");
    current = device;
  }
  int device_of(const void* p) override {
    const auto it = owner.find(p);
    return it == owner.end() ? -1 : it->second;
  }
  StreamHandle create_stream() override {
    ++streams_made[current];
    return stream_of(current);
  }
  void order_after(StreamHandle waiter, StreamHandle signal) override { orders.emplace_back(waiter, signal); }
  void* create_pool(std::uint64_t release_threshold) override {
    if (pool_out_of_memory)
      throw gs::kernels::device_error("cudaErrorMemoryAllocation", "out of memory", "cudaMemPoolCreate");
    ++pools_made[current];
    pool_thresholds.push_back(release_threshold);
    return reinterpret_cast<void*>(std::uintptr_t(0x9000 + current));
  }
  static StreamHandle stream_of(int device) { return reinterpret_cast<StreamHandle>(std::uintptr_t(0x1000 + device)); }
};

const StreamHandle kCallerStream = reinterpret_cast<StreamHandle>(std::uintptr_t(0xca11));
const float kOnDevice1[4] = {1, 2, 3, 4};  // stands for device memory of device 1

// Two devices with kOnDevice1 in device 1's memory, device 0 current.
FakeRuntime two_devices() {
  FakeRuntime rt;
  rt.devices = {good_device(80), good_device(80)};
  rt.owner[kOnDevice1] = 1;
  return rt;
}

TEST(CudaHostDevice, AutoFallsBackOnceWhenNoKernelImage) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  rt.devices[0].major = 7;
  rt.devices[0].kernel_image = false;
  DevicePolicy policy(rt);
  const auto first = policy.choose("auto");
  EXPECT_EQ(first.kind, BackendKind::cpu);
  EXPECT_NE(first.warning.find("no kernel image"), std::string::npos) << first.warning;
  EXPECT_NE(first.warning.find("70 in CMAKE_CUDA_ARCHITECTURES"), std::string::npos) << first.warning;
  const auto second = policy.choose("auto");
  EXPECT_EQ(second.kind, BackendKind::cpu);
  EXPECT_TRUE(second.warning.empty()) << "one warning per process, not one per call";
}

// The DDP hook resolves a bucket's backend for the bucket's device: only that device is asked
// (asking device 0, which rank r's GPU r is not, would make a CUDA context there).
TEST(CudaHostDevice, ChoosingForADeviceAsksThatDeviceOnly) {
  FakeRuntime rt = two_devices();
  rt.devices[0].kernel_image = false;  // device 0 could not even run the kernels
  DevicePolicy policy(rt);
  EXPECT_EQ(policy.choose("cuda", 1).kind, BackendKind::cuda);
  EXPECT_EQ(policy.choose("auto", 1).kind, BackendKind::cuda);
  EXPECT_EQ(rt.property_reads.count(0), 0u) << "device 0 was asked about";
  EXPECT_THROW(policy.choose("cuda", 0), gs::Error);
}

TEST(CudaHostDevice, AutoFallsBackWithoutMemoryPools) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  rt.devices[0].memory_pools = false;
  DevicePolicy policy(rt);
  const auto c = policy.choose("auto");
  EXPECT_EQ(c.kind, BackendKind::cpu);
  EXPECT_NE(c.warning.find("memory pools"), std::string::npos) << c.warning;
}

TEST(CudaHostDevice, ExplicitCudaOnAnUnusableDeviceIsAnError) {
  for (const bool image : {false, true}) {
    FakeRuntime rt;
    rt.devices = {good_device(80)};
    rt.devices[0].kernel_image = image;
    rt.devices[0].memory_pools = !image;  // one of the two missing
    DevicePolicy policy(rt);
    try {
      policy.choose("cuda");
      ADD_FAILURE() << "backend cuda on a device that cannot run the kernels must throw";
    } catch (const gs::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(image ? "memory pools" : "no kernel image"), std::string::npos) << what;
      EXPECT_NE(what.find("--backend cpu"), std::string::npos) << what;
    }
  }
}

TEST(CudaHostDevice, ChoiceWithNoDeviceAndWithAUsableOne) {
  FakeRuntime none;
  DevicePolicy p0(none);
  const auto c0 = p0.choose("auto");
  EXPECT_EQ(c0.kind, BackendKind::cpu);
  EXPECT_TRUE(c0.warning.empty()) << "no GPU at all is the ordinary CPU case, no warning";
  EXPECT_THROW(p0.choose("cuda"), gs::Error);

  FakeRuntime one;
  one.devices = {good_device(80)};
  DevicePolicy p1(one);
  EXPECT_EQ(p1.choose("auto").kind, BackendKind::cuda);
  EXPECT_EQ(p1.choose("cuda").kind, BackendKind::cuda);
}

TEST(CudaHostDevice, ScopeRunsOnTheDataDeviceAndRestoresTheCallers) {
  FakeRuntime rt;
  rt.devices = {good_device(108), good_device(132)};
  rt.owner[kOnDevice1] = 1;
  rt.current = 0;  // as on the DDP hook's thread under torchrun, whatever the rank's device
  DevicePolicy policy(rt);
  {
    DeviceScope scope(policy, kOnDevice1, kCallerStream);
    EXPECT_EQ(scope.device(), 1);
    EXPECT_EQ(rt.current, 1) << "the data's device is current inside the call";
    EXPECT_EQ(scope.stream(), FakeRuntime::stream_of(1)) << "gradscope's stream of device 1";
    EXPECT_EQ(scope.properties().multiprocessors, 132) << "grids sized for the data's device";
  }
  EXPECT_EQ(rt.current, 0) << "the caller's device is current again";
}

TEST(CudaHostDevice, ScopeOrdersItselfAfterTheCallerStreamAndTheCallerAfterIt) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  DevicePolicy policy(rt);
  const StreamHandle own = FakeRuntime::stream_of(0);
  {
    DeviceScope scope(policy, nullptr, kCallerStream);
    ASSERT_EQ(rt.orders.size(), 1u);
    EXPECT_EQ(rt.orders[0], std::make_pair(own, kCallerStream)) << "gradscope's stream waits for the caller's";
    EXPECT_NE(scope.stream(), kCallerStream);
    EXPECT_NE(scope.stream(), nullptr) << "never the legacy default stream";
  }
  ASSERT_EQ(rt.orders.size(), 2u);
  EXPECT_EQ(rt.orders[1], std::make_pair(kCallerStream, own)) << "the caller's stream waits for gradscope's";
}

// Rule: host data with no caller stream (a vector to upload) is ordered after no stream: the legacy
// default stream, which would stand for the caller's, is a barrier for every blocking stream of
// the device (PyTorch's compute stream among them), both ways.
TEST(CudaHostDevice, HostDataIsNeverOrderedWithTheLegacyStream) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  DevicePolicy policy(rt);
  { DeviceScope scope(policy, nullptr, nullptr); }
  const float host[4] = {1, 2, 3, 4};
  { DeviceScope scope(policy, host, nullptr); }
  EXPECT_TRUE(rt.orders.empty()) << rt.orders.size() << " orderings with the legacy stream";
  { DeviceScope scope(policy, host, kCallerStream); }  // a caller's stream given: ordered both ways
  EXPECT_EQ(rt.orders.size(), 2u);
}

TEST(CudaHostDevice, CallerStreamOverridesTheSelectorsStreamAndPlacesHostData) {
  FakeRuntime rt;
  rt.devices = {good_device(80), good_device(80)};
  DevicePolicy policy(rt);
  const StreamHandle torch_stream = reinterpret_cast<StreamHandle>(std::uintptr_t(0x7043));
  CallerStream given(1, torch_stream);
  {
    DeviceScope scope(policy, nullptr, kCallerStream);  // host data: staged on the stream's device
    EXPECT_EQ(scope.device(), 1);
    EXPECT_EQ(rt.orders.back(), std::make_pair(FakeRuntime::stream_of(1), torch_stream));
  }
  EXPECT_EQ(rt.orders.back(), std::make_pair(torch_stream, FakeRuntime::stream_of(1)));
  EXPECT_EQ(rt.current, 0);
}

TEST(CudaHostDevice, CallerStreamOfAnotherDeviceThanTheDataIsAnError) {
  FakeRuntime rt = two_devices();
  DevicePolicy policy(rt);
  CallerStream given(0, kCallerStream);
  try {
    DeviceScope scope(policy, kOnDevice1, nullptr);
    ADD_FAILURE() << "data on device 1 with a stream of device 0 must throw";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rt.current, 0);
  EXPECT_TRUE(rt.orders.empty()) << "nothing ordered for a call that did not start";
}

TEST(CudaHostDevice, ScopeOnAnUnusableDataDeviceIsAnError) {
  FakeRuntime rt = two_devices();
  rt.devices[1].kernel_image = false;
  DevicePolicy policy(rt);
  EXPECT_THROW({ DeviceScope scope(policy, kOnDevice1, nullptr); }, gs::Error);
  EXPECT_EQ(rt.current, 0);
}

TEST(CudaHostDevice, ScopeRestoresTheDeviceWhenTheWorkThrows) {
  FakeRuntime rt = two_devices();
  DevicePolicy policy(rt);
  EXPECT_THROW(
      {
        DeviceScope scope(policy, kOnDevice1, kCallerStream);
        throw gs::kernels::device_error("cudaErrorIllegalAddress", "an illegal memory access", "a kernel");
      },
      DeviceError);
  EXPECT_EQ(rt.current, 0);
  EXPECT_EQ(rt.orders.size(), 2u) << "the caller's stream still waits for what was queued";
}

TEST(CudaHostDevice, PropertiesStreamsAndPoolsAreMadeOncePerDevice) {
  FakeRuntime rt;
  rt.devices = {good_device(80), good_device(132)};
  rt.owner[kOnDevice1] = 1;
  DevicePolicy policy(rt);
  for (int i = 0; i < 3; ++i) {
    {
      DeviceScope a(policy, kOnDevice1, nullptr);
      policy.pool(a.device());
    }
    DeviceScope b(policy, nullptr, nullptr);  // host data: the current device, 0 again
    EXPECT_EQ(b.device(), 0);
    policy.pool(b.device());
  }
  EXPECT_EQ(rt.property_reads[0], 1);
  EXPECT_EQ(rt.property_reads[1], 1);
  EXPECT_EQ(rt.streams_made[0], 1);
  EXPECT_EQ(rt.streams_made[1], 1) << "device 1's stream is made with device 1 current";
  EXPECT_EQ(rt.pools_made[0], 1);
  EXPECT_EQ(rt.pools_made[1], 1);
  EXPECT_EQ(policy.properties(1).multiprocessors, 132);
}

TEST(CudaHostDevice, PoolKeepsABoundedReserve) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  DevicePolicy policy(rt);
  policy.pool(0);
  ASSERT_EQ(rt.pool_thresholds.size(), 1u);
  EXPECT_EQ(rt.pool_thresholds[0], gs::kernels::kPoolReleaseThreshold);
  EXPECT_LE(rt.pool_thresholds[0], std::uint64_t{1} << 30) << "a bounded release threshold";
  rt.devices[0].memory_pools = false;
  FakeRuntime no_pools;
  no_pools.devices = {rt.devices[0]};
  DevicePolicy p2(no_pools);
  EXPECT_THROW(p2.pool(0), gs::Error);
  EXPECT_TRUE(no_pools.pools_made.empty());
}

TEST(CudaHostDevice, OutOfMemoryIsADeviceErrorThatSaysSo) {
  FakeRuntime rt;
  rt.devices = {good_device(80)};
  rt.pool_out_of_memory = true;
  DevicePolicy policy(rt);
  try {
    policy.pool(0);
    ADD_FAILURE() << "the injected out-of-memory must surface";
  } catch (const DeviceError& e) {
    EXPECT_TRUE(e.out_of_memory());
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation (out of memory)"), std::string::npos) << e.what();
  }
}

TEST(CudaHostDevice, DeviceErrorsAreClassifiedByStatus) {
  const DeviceError oom = gs::kernels::device_error("cudaErrorMemoryAllocation", "out of memory", "x");
  EXPECT_TRUE(oom.out_of_memory());
  const DeviceError image = gs::kernels::device_error("cudaErrorNoKernelImageForDevice", "no kernel image", "y");
  EXPECT_FALSE(image.out_of_memory());
  EXPECT_NE(std::string(image.what()).find("CMAKE_CUDA_ARCHITECTURES"), std::string::npos) << image.what();
  const DeviceError other = gs::kernels::device_error("cudaErrorIllegalAddress", "illegal address", "z at f.cu:1");
  EXPECT_FALSE(other.out_of_memory());
  EXPECT_EQ(std::string(other.what()), "CUDA error: cudaErrorIllegalAddress (illegal address) in z at f.cu:1");
  const gs::Error& as_base = other;  // callers that catch gs::Error still see it
  EXPECT_NE(dynamic_cast<const DeviceError*>(&as_base), nullptr);
}

TEST(CudaHostDevice, GridFollowsTheDevicesMultiprocessors) {
  using gs::kernels::grid_blocks;
  EXPECT_EQ(grid_blocks(2, 256, 1), 1u);
  EXPECT_EQ(grid_blocks(2, 256, 0), 1u);
  EXPECT_EQ(grid_blocks(2, 256, 256 * 3), 3u);
  EXPECT_EQ(grid_blocks(2, 256, 1u << 24), 16u);  // 8 blocks per SM
  EXPECT_EQ(grid_blocks(132, 256, 1u << 24), 1056u);
}

}  // namespace
}  // namespace gs::testing
