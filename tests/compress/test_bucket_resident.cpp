// BucketCompressor::exchange_resident, the DDP hook's device path, on the cuda-host backend: the
// CUDA path's code over fake devices in host memory (gs/kernels/cuda_host.hpp), so its rules run
// without a GPU. Each case names the rule of the GPU path it stands for; docs/architecture.md
// ("What the cuda-host cases catch") lists the change to the code that makes each one fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "bucket_test_util.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"

using namespace gs::compress;
namespace ch = gs::kernels::cuda_host;

namespace {

using gs::testing::grad;
using gs::testing::laplace;
using gs::testing::ThreadDeviceCollectives;

std::unique_ptr<BucketCompressor> make_bucket(const std::string& method, double density, int rank,
                                              const std::string& backend, WarmupSchedule w = {}) {
  return gs::testing::make_bucket(method, density, rank, w, backend);
}

// Buckets as DDP hands them over: step 0 in registration order, later steps regrouped.
const std::vector<std::vector<std::vector<BucketParam>>> kLayouts = {{{{10, 3000}, {11, 2000}}, {{12, 770}}},
                                                                     {{{12, 770}, {11, 2000}}, {{10, 3000}}}};

// One worker's updates over `steps` steps: the host path (backend cpu) or the device path
// (cuda-host, its buckets on fake device `device`, with or without device collectives).
std::vector<std::vector<float>> run(const std::string& method, double density, Collectives& comm, bool device,
                                    bool device_comm, int steps, WarmupSchedule w = {}, int fake_device = 1) {
  auto bc = make_bucket(method, density, comm.rank(), device ? "cuda-host" : "cpu", w);
  ThreadDeviceCollectives dc(comm);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    const auto& layout = kLayouts[std::size_t(s > 0)];
    std::vector<float> step_out;
    for (std::size_t b = 0; b < layout.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : layout[b]) n += p.numel;
      auto g = grad(n, 1000 * std::uint64_t(s) + 10 * b + std::uint64_t(comm.rank()));
      const bool last = b + 1 == layout.size();
      if (device) {
        const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), fake_device);
        const gs::kernels::CallerStream caller(fake_device, ch::caller_stream(fake_device));
        bc->exchange_resident({int(b), g.data(), n, gs::kernels::BackendKind::cuda_host, fake_device}, layout[b], comm,
                              device_comm ? &dc : nullptr, last);
        step_out.insert(step_out.end(), g.begin(), g.end());
      } else {
        std::vector<float> o(n);
        bc->exchange(int(b), g, layout[b], comm, o, last);
        step_out.insert(step_out.end(), o.begin(), o.end());
      }
    }
    out.push_back(std::move(step_out));
  }
  EXPECT_EQ(bc->steps(), steps);
  return out;
}

}  // namespace

class CudaHostBucket : public ::testing::TestWithParam<std::string> {};

// Rule: a bucket kept on its device gets the update the host path computes, to the bit (the same
// residual arithmetic, selection and rank-ordered sum), whether the selections are gathered through
// the host (Gloo) or on the device (NCCL), and whether the compressor selects on the device or
// needs the host (randomk, the quantizers: the bucket goes down and the update up).
TEST_P(CudaHostBucket, UpdatesEqualTheHostPathToTheBit) {
  const std::string method = GetParam();
  const double density = density_based(method) ? 0.01 : 1.0;
  constexpr int kWorkers = 3, kSteps = 4;
  std::vector<std::vector<std::vector<float>>> host(kWorkers), gathered(kWorkers), on_device(kWorkers);
  run_workers(kWorkers, [&](Collectives& comm) {
    const auto r = std::size_t(comm.rank());
    host[r] = run(method, density, comm, false, false, kSteps);
    gathered[r] = run(method, density, comm, true, false, kSteps, {}, int(r) + 1);
    on_device[r] = run(method, density, comm, true, true, kSteps, {}, int(r) + 1);
  });
  for (int r = 0; r < kWorkers; ++r)
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(gathered[r][s], host[r][s]) << method << ": host gather, step " << s << " worker " << r;
      if (method != "none") {  // a float all-reduce: another order of the sum (Gloo's ring vs ours)
        EXPECT_EQ(on_device[r][s], host[r][s]) << method << ": device gather, step " << s << " worker " << r;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Methods, CudaHostBucket,
                         ::testing::Values("topk", "sidco-e", "sidco-topk", "dgc", "randomk", "qsgd-mn", "none"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

// Rule: the worker thread of rank r works on GPU r. A thread starts with device 0 current (as a
// CUDA thread does); a bucket on device 1 must leave device 0 without any work, not even the
// pointer query that would start a context there. And its work is ordered after the caller's
// stream (torch's current stream of the device), never with the legacy default stream.
TEST(CudaHostBucketRules, TheWorkerThreadWorksOnTheBucketsDevice) {
  std::map<int, std::uint64_t> work;
  std::uint64_t legacy = 0;
  std::thread worker([&] {
    ch::reset_work_by_device();
    SoloCollectives solo;
    run("sidco-e", 0.01, solo, true, false, 3);
    work = ch::work_by_device();
    legacy = ch::legacy_stream_orders();
  });
  worker.join();
  EXPECT_GT(work[1], 0u) << "the bucket's device did the work";
  EXPECT_EQ(work.count(0), 0u) << "work landed on device 0: " << work[0] << " operations";
  EXPECT_EQ(legacy, 0u) << "orderings with the legacy default stream";
}

// Rule: only the selection crosses the bus. At density 0.01 with a host all-gather this worker's
// selection goes down (8 bytes a pair, its report with it) and the others' come up (counted apart):
// at most 3% of the bucket's bytes, warm-up aside, when the selection lands near the density
// (Laplace gradients: 2% of them are the pairs). With device collectives the selection stays: the
// device writes the bucket's report (its figures) into host memory, and nothing else crosses
// (SIDCo with its fit alone: the carried estimate brings the selection to the host to learn).
TEST(CudaHostBucketRules, OnlyTheSelectionCrossesTheBus) {
  for (const std::string method : {"sidco-e", "topk"}) {
    for (const bool device_comm : {false, true}) {
      SCOPED_TRACE(method + (device_comm ? ", device collectives" : ", host gather"));
      std::vector<StepStats> stats(2);
      run_workers(2, [&](Collectives& comm) {
        CompressorOptions o = gs::testing::seeded(comm.rank(), "cuda-host");
        if (method == "sidco-e") o.sidco_estimate = "fit";
        auto bc = std::make_unique<BucketCompressor>(make_compressor(method, 0.01, o), WarmupSchedule{});
        ThreadDeviceCollectives dc(comm);
        const int dev = comm.rank() + 1;
        for (int s = 0; s < 3; ++s) {
          auto g = laplace(200000, 77 * std::uint64_t(s) + std::uint64_t(comm.rank()));
          const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), dev);
          const gs::kernels::CallerStream caller(dev, ch::caller_stream(dev));
          bc->exchange_resident({0, g.data(), g.size(), gs::kernels::BackendKind::cuda_host, dev},
                                std::vector<BucketParam>{{1, 200000}}, comm, device_comm ? &dc : nullptr, true);
        }
        stats[std::size_t(comm.rank())] = bc->history().back();
      });
      for (const StepStats& s : stats) {
        const double bucket = 4.0 * 200000;
        const double own = double(s.host_device_bytes - s.host_device_gathered_bytes);
        EXPECT_GT(s.selected, 0u);
        if (device_comm) {
          EXPECT_EQ(own, double(sizeof(gs::kernels::ExchangeReport))) << "only the bucket's report crosses";
          EXPECT_EQ(s.host_device_gathered_bytes, 0u);
        } else {
          EXPECT_GE(own, 8.0 * double(s.selected)) << "the selection comes down";
          EXPECT_LE(own, 0.03 * bucket) << s.host_device_bytes << " bytes crossed";
          EXPECT_GT(s.host_device_gathered_bytes, 0u) << "the other worker's selection comes up";
          EXPECT_LE(double(s.host_device_gathered_bytes), 0.03 * bucket);
        }
      }
    }
  }
}

// Rule: a device bucket's dense bytes are its elements in the model's dtype (a float16 bucket
// widened to float32 for the work: 2 bytes an element), for a device selection, a host rule and
// a dense all-reduce alike; what crosses and travels is the float32 selection, whatever the dtype.
TEST(CudaHostBucketRules, DenseBytesCountTheBucketsDtype) {
  for (const std::string method : {"topk", "randomk", "none"}) {
    std::map<unsigned, StepStats> last;
    for (const unsigned size : {2u, 4u}) {
      SoloCollectives solo;
      auto bc = make_bucket(method, density_based(method) ? 0.01 : 1.0, 0, "cuda-host");
      auto g = laplace(5000, 3);
      const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), 1);
      const gs::kernels::CallerStream caller(1, ch::caller_stream(1));
      bc->exchange_resident({0, g.data(), g.size(), gs::kernels::BackendKind::cuda_host, 1, size},
                            std::vector<BucketParam>{{1, 5000}}, solo, nullptr, true);
      last[size] = bc->history().back();
    }
    EXPECT_EQ(last[2].dense_bytes, 2u * 5000u) << method;
    EXPECT_EQ(last[4].dense_bytes, 4u * 5000u) << method;
    EXPECT_EQ(last[2].bytes_sent, last[4].bytes_sent) << method;
  }
}

// Rule: residuals live on the device and follow their parameters; a checkpoint (taken between
// steps, the residuals read back from the device) continues exactly in a new process's state.
TEST(CudaHostBucketRules, ACheckpointOfDeviceResidualsContinuesExactly) {
  SoloCollectives solo;
  auto a = make_bucket("sidco-e", 0.01, 0, "cuda-host");
  auto step = [&](BucketCompressor& bc, int s) {
    auto g = grad(5770, 5 + std::uint64_t(s));
    const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), 2);
    const gs::kernels::CallerStream caller(2, ch::caller_stream(2));
    const std::vector<BucketParam> all = {{10, 3000}, {11, 2000}, {12, 770}};
    bc.exchange_resident({0, g.data(), g.size(), gs::kernels::BackendKind::cuda_host, 2}, all, solo, nullptr, true);
    return g;
  };
  for (int s = 0; s < 3; ++s) step(*a, s);
  gs::StateWriter w;
  a->save_state(w);
  auto b = make_bucket("sidco-e", 0.01, 0, "cuda-host");
  gs::StateReader r(w.bytes(), "test");
  b->load_state(r);
  for (int s = 3; s < 6; ++s) EXPECT_EQ(step(*a, s), step(*b, s)) << "step " << s;
}

// Rule: making a state (its compressor) asks the CUDA runtime about no device: backend auto is
// resolved at the first selection, where the DDP hook's thread is already on the bucket's device
// (rank r's GPU r), so the other ranks make no context on GPU 0.
TEST(CudaHostBucketRules, MakingAStateAsksNoDevice) {
  const std::uint64_t before = gs::kernels::backend_probes();
  for (const char* method : {"sidco-e", "topk", "dgc", "sidco-topk"}) make_bucket(method, 0.01, 0, "auto");
  EXPECT_EQ(gs::kernels::backend_probes(), before);
  auto bc = make_bucket("sidco-e", 0.01, 0, "auto");
  SoloCollectives solo;
  const auto g = grad(1000, 3);
  std::vector<float> out(1000);
  bc->exchange(0, g, std::vector<BucketParam>{{1, 1000}}, solo, out, true);
  EXPECT_EQ(gs::kernels::backend_probes(), before + (gs::kernels::cuda_built() ? 1 : 0)) << "at the first selection";
  EXPECT_THROW(make_bucket("sidco-e", 0.01, 0, "gpu"), gs::Error) << "the name is checked at once";
}

// Rule: work is ordered after the caller's stream (the hook's, which waits for the bucket), and one
// state serves one device: a bucket of another device is refused, naming both.
TEST(CudaHostBucketRules, OneStateServesOneDevice) {
  SoloCollectives solo;
  auto bc = make_bucket("topk", 0.01, 0, "cuda-host");
  auto g = grad(1000, 1);
  {
    const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), 1);
    bc->exchange_resident({0, g.data(), 1000, gs::kernels::BackendKind::cuda_host, 1},
                          std::vector<BucketParam>{{1, 1000}}, solo, nullptr, true);
  }
  const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), 2);
  try {
    bc->exchange_resident({0, g.data(), 1000, gs::kernels::BackendKind::cuda_host, 2},
                          std::vector<BucketParam>{{1, 1000}}, solo, nullptr, true);
    ADD_FAILURE() << "a bucket on another device must be refused";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
}
