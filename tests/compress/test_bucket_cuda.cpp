// BucketCompressor::exchange_resident on backend cuda: the DDP hook's device path on a GPU (its
// cuda-host twin, test_bucket_resident.cpp and test_bucket_syncs.cpp, runs the same code on the
// host everywhere). Skips without a usable GPU, as the other CUDA suites; scripts/gpu-check.sh runs
// it (filter CudaBucket.*).
#include <gtest/gtest.h>

#include <cstring>

#include "bucket_test_util.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/vector_ops.hpp"

using namespace gs::compress;

namespace {

// Device collectives of one worker over device memory: the all-gather is a device copy.
class SoloDeviceCollectives final : public DeviceCollectives {
 public:
  explicit SoloDeviceCollectives(gs::kernels::VectorOps& ops) : ops_(ops) {}
  void allgather(const std::int32_t* indices, const float* values, std::uint64_t count, std::int32_t* indices_all,
                 float* values_all) override {
    ops_.copy(indices_all, indices, count);
    ops_.copy(values_all, values, count);
  }
  void allreduce_sum(float*, std::uint64_t) override {}

 private:
  gs::kernels::VectorOps& ops_;
};

const std::vector<std::vector<BucketParam>> kBuckets = {{{10, 30000}, {11, 20000}}, {{12, 7700}}};

// One worker's updates over 3 steps on GPU 0 (device collectives or not), or on the host path.
std::vector<std::vector<float>> updates(const std::string& method, bool on_gpu, bool device_comm,
                                        std::vector<StepStats>* stats = nullptr) {
  auto bc = gs::testing::make_bucket(method, 0.01, 0, {}, on_gpu ? "cuda" : "cpu");
  auto ops = gs::kernels::make_vector_ops(gs::kernels::BackendKind::cuda, 0);
  SoloCollectives solo;
  SoloDeviceCollectives dc(*ops);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < 3; ++s) {
    std::vector<float> step;
    for (std::size_t b = 0; b < kBuckets.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : kBuckets[b]) n += p.numel;
      const auto g = gs::testing::grad(n, 100 * std::uint64_t(s) + b);
      std::vector<float> u(n);
      const bool last = b + 1 == kBuckets.size();
      if (on_gpu) {
        auto d = ops->floats(n);
        ops->upload(d.data(), g.data(), n * sizeof(float));
        bc->exchange_resident({int(b), d.data(), n, gs::kernels::BackendKind::cuda, 0}, kBuckets[b], solo,
                              device_comm ? &dc : nullptr, last);
        ops->download(u.data(), d.data(), n * sizeof(float));
      } else {
        bc->exchange(int(b), g, kBuckets[b], solo, u, last);
      }
      step.insert(step.end(), u.begin(), u.end());
    }
    out.push_back(std::move(step));
  }
  if (stats) stats->assign(bc->history().begin(), bc->history().end());
  return out;
}

// One worker's step records over 3 steps through device collectives, on GPU 0 (cuda) or on the
// cuda-host backend's fake device 1 (the data declared there, its own caller stream, as the DDP
// hook's calls come on a GPU).
std::vector<StepStats> device_steps(const std::string& method, gs::kernels::BackendKind kind) {
  const bool host = kind == gs::kernels::BackendKind::cuda_host;
  const int dev = host ? 1 : 0;
  auto bc = gs::testing::make_bucket(method, 0.01, 0, {}, host ? "cuda-host" : "cuda");
  auto ops = gs::kernels::make_vector_ops(kind, dev);
  SoloCollectives solo;
  SoloDeviceCollectives dc(*ops);
  for (int s = 0; s < 3; ++s) {
    for (std::size_t b = 0; b < kBuckets.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : kBuckets[b]) n += p.numel;
      auto g = gs::testing::grad(n, 100 * std::uint64_t(s) + b);
      const bool last = b + 1 == kBuckets.size();
      if (host) {
        const gs::kernels::cuda_host::DeviceMemory on(g.data(), n * sizeof(float), dev);
        const gs::kernels::CallerStream caller(dev, gs::kernels::cuda_host::caller_stream(dev));
        bc->exchange_resident({int(b), g.data(), n, kind, dev}, kBuckets[b], solo, &dc, last);
      } else {
        auto d = ops->floats(n);
        ops->upload(d.data(), g.data(), n * sizeof(float));
        bc->exchange_resident({int(b), d.data(), n, kind, dev}, kBuckets[b], solo, &dc, last);
      }
    }
  }
  return {bc->history().begin(), bc->history().end()};
}

}  // namespace

// What a bucket queues on the GPU is what the cuda-host backend counts for the same calls
// (StepStats' launches, single-thread launches, allocations, events, CUB queries and the elements
// passed over): the ledger CI bounds (DeviceWork.*) is the GPU's.
TEST(CudaBucket, DeviceWorkIsWhatItsHostTwinCounts) {
  if (!gs::kernels::cuda_available())
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine (scripts/gpu-check.sh); "
                    "the cuda-host ledger is bounded here (DeviceWork.*)";
  for (const std::string method : {"sidco-e", "topk", "dgc", "sidco-topk"}) {
    SCOPED_TRACE(method);
    const auto gpu = device_steps(method, gs::kernels::BackendKind::cuda);
    const auto twin = device_steps(method, gs::kernels::BackendKind::cuda_host);
    ASSERT_EQ(gpu.size(), twin.size());
    for (std::size_t s = 0; s < gpu.size(); ++s) {
      EXPECT_EQ(gpu[s].launches, twin[s].launches) << "step " << s;
      EXPECT_EQ(gpu[s].single_thread_launches, twin[s].single_thread_launches) << "step " << s;
      EXPECT_EQ(gpu[s].scratch_queries, twin[s].scratch_queries) << "step " << s;
      EXPECT_EQ(gpu[s].allocations, twin[s].allocations) << "step " << s;
      EXPECT_EQ(gpu[s].events_created, twin[s].events_created) << "step " << s;
      // the candidates' passes go with the data, which the GPU's sums round otherwise; a gated pass
      // (the radix select's histograms, every select_then) is counted by the twin where its gate was
      // open, which the CUDA backend, queueing it, cannot see: it counts none of it
      EXPECT_LE(double(gpu[s].elements_passed), double(twin[s].elements_passed) + 0.01 * double(gpu[s].n));
      EXPECT_GE(double(gpu[s].elements_passed), double(twin[s].elements_passed) - 6.01 * double(gpu[s].n))
          << "no more than a bucket's selections (two, and an exact top-k's three histograms and one "
             "selection) apart";
    }
  }
}

// On a GPU the device path gives the host path's update to the bit, whether the selection comes
// to the host (Gloo) or stays for device collectives (NCCL), and with device collectives no
// bucket waits for the device but for SIDCo's carried estimate.
TEST(CudaBucket, ExchangeResidentOnTheGpuEqualsTheHostPath) {
  if (!gs::kernels::cuda_available())
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine (scripts/gpu-check.sh); "
                    "the same code runs here as cuda-host (CudaHostBucket.*, SyncBounds.*)";
  for (const std::string method : {"sidco-e", "sidco-gp", "topk", "dgc"}) {
    SCOPED_TRACE(method);
    const auto host = updates(method, false, false);
    std::vector<StepStats> gathered_stats, device_stats;
    const auto gathered = updates(method, true, false, &gathered_stats);
    const auto device = updates(method, true, true, &device_stats);
    for (std::size_t s = 0; s < host.size(); ++s) {
      // SIDCo's thresholds come from sums the GPU adds in another order (docs/architecture.md,
      // "Numerics"): an element at the threshold itself may go one way or the other.
      if (method == "topk" || method == "dgc") {
        EXPECT_EQ(gathered[s], host[s]) << "step " << s;
        EXPECT_EQ(device[s], host[s]) << "step " << s;
      }
      EXPECT_EQ(device[s], gathered[s]) << "step " << s;
      // SIDCo's carried estimate (the default) brings each selection to the host to learn from it:
      // one wait a bucket; its fit alone waits for none (SyncBounds.*, on cuda-host).
      if (method.starts_with("sidco-"))
        EXPECT_LE(device_stats[s].host_syncs, std::uint64_t(device_stats[s].buckets)) << "step " << s;
      else
        EXPECT_EQ(device_stats[s].host_syncs, 0u) << "step " << s;
      EXPECT_LE(gathered_stats[s].host_syncs, std::uint64_t(gathered_stats[s].buckets)) << "step " << s;
    }
  }
}
