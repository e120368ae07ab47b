// What the DDP hook's device path makes the host wait for, on the cuda-host backend (the CUDA
// path's code over fake devices that count every blocking synchronization: a stream synchronized,
// an event waited for, a copy to the host that returns once done). The devices run behind the host
// here (cuda_host::set_device_lag): work queued is done only after a synchronization, as on a GPU
// that has not caught up, so anything that waits for the device is seen waiting. Bounds, per bucket
// per step: with device collectives (NCCL) nothing; with the host's all-gather (Gloo) one, the
// selection coming to the host; one selection call on device data, one. docs/gpu.md lists the
// read-back that, put back, makes each case fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "bucket_test_util.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"

using namespace gs::compress;
namespace ch = gs::kernels::cuda_host;
using gs::testing::laplace;
using gs::testing::ThreadDeviceCollectives;

namespace {

// The fake devices behind the host for the object's lifetime.
struct DevicesBehind {
  DevicesBehind() { ch::set_device_lag(true); }
  ~DevicesBehind() { ch::set_device_lag(false); }
};

const std::vector<std::vector<BucketParam>> kBuckets = {{{10, 40000}, {11, 20000}}, {{12, 7700}}};

struct WorkerRun {
  std::vector<StepStats> steps;
  std::uint64_t device_syncs = 0;  // on the worker's fake device, while it exchanged (per-device count)
  std::vector<std::vector<float>> updates;
};

// One worker's steps on fake device rank + 1, two buckets a step, through device collectives or
// the host gather. nan_at: a step at which worker 1's first bucket holds a NaN (-1: none).
WorkerRun run(const std::string& method, double density, Collectives& comm, bool device_comm, int steps,
              const CompressorOptions& options, int nan_at = -1) {
  BucketCompressor bc(make_compressor(method, density, options), {});
  ThreadDeviceCollectives dc(comm);
  const int dev = comm.rank() + 1;
  WorkerRun out;
  const std::uint64_t before = ch::syncs_by_device()[dev].total();
  for (int s = 0; s < steps; ++s) {
    std::vector<float> update;
    for (std::size_t b = 0; b < kBuckets.size(); ++b) {
      std::uint64_t n = 0;
      for (const auto& p : kBuckets[b]) n += p.numel;
      auto g = laplace(n, 1000 * std::uint64_t(s) + 10 * b + std::uint64_t(comm.rank()));
      if (s == nan_at && comm.rank() == 1 && b == 0) g[17] = NAN;
      const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), dev);
      const gs::kernels::CallerStream caller(dev, ch::caller_stream(dev));
      bc.exchange_resident({int(b), g.data(), n, gs::kernels::BackendKind::cuda_host, dev}, kBuckets[b], comm,
                           device_comm ? &dc : nullptr, b + 1 == kBuckets.size());
      update.insert(update.end(), g.begin(), g.end());
    }
    out.updates.push_back(std::move(update));
  }
  out.device_syncs = ch::syncs_by_device()[dev].total() - before;  // before history() settles the steps
  out.steps.assign(bc.history().begin(), bc.history().end());
  return out;
}

std::vector<WorkerRun> run_all(const std::string& method, bool device_comm, int steps = 3, CompressorOptions o = {},
                               double density = 0.01, int nan_at = -1) {
  std::vector<WorkerRun> runs(2);
  run_workers(2, [&](Collectives& comm) {
    CompressorOptions mine = o;
    mine.seed = worker_seed(7, std::uint64_t(comm.rank()));
    mine.backend = "cuda-host";
    runs[std::size_t(comm.rank())] = run(method, density, comm, device_comm, steps, mine, nan_at);
  });
  return runs;
}

const std::vector<std::string> kDeviceMethods = {"sidco-e", "sidco-p", "sidco-gp", "topk", "dgc", "sidco-topk"};

}  // namespace

// SIDCo with its fit alone (--sidco-estimate fit): the carried estimate learns from each selection
// on the host (one synchronization a bucket, SidcoCarriedEstimateWaitsOncePerBucket).
CompressorOptions fit_alone(const std::string& method) {
  CompressorOptions o;
  if (method.starts_with("sidco-") && method != "sidco-topk") o.sidco_estimate = "fit";
  return o;
}

// Bound: with device collectives a bucket makes no blocking synchronization. SIDCo's stages and
// count correction (its fit alone), DGC's threshold, sidco-topk's bound and exact top-k are
// decided on the device; the counts travel with the pairs in the all-gather; the skip, the update
// and the residual's commit are decided there too; the step's figures arrive in host memory the
// device writes, read once in.
TEST(SyncBounds, DeviceCollectivesMakeNoSynchronization) {
  DevicesBehind behind;
  for (const std::string& method : kDeviceMethods) {
    SCOPED_TRACE(method);
    for (const WorkerRun& r : run_all(method, true, 3, fit_alone(method))) {
      EXPECT_EQ(r.device_syncs, 0u) << "synchronizations on the worker's device while it exchanged";
      ASSERT_EQ(r.steps.size(), 3u);
      for (const StepStats& s : r.steps) {
        EXPECT_EQ(s.host_syncs, 0u) << "per step";
        EXPECT_EQ(s.buckets, 2);
        EXPECT_FALSE(s.skipped);
        EXPECT_GT(s.selected, 0u) << "the device's report of the step arrived";
        EXPECT_EQ(s.host_device_bytes, 2 * sizeof(gs::kernels::ExchangeReport)) << "only the reports crossed";
      }
    }
  }
}

// Bound: SIDCo's carried estimate (the default) brings each bucket's selection to the host, where
// it teaches the next step's threshold: one synchronization a bucket, with device collectives too.
TEST(SyncBounds, SidcoCarriedEstimateWaitsOncePerBucket) {
  DevicesBehind behind;
  for (const WorkerRun& r : run_all("sidco-e", true)) {
    ASSERT_EQ(r.steps.size(), 3u);
    for (const StepStats& s : r.steps) {
      EXPECT_GE(s.host_syncs, 1u);
      EXPECT_LE(s.host_syncs, std::uint64_t(s.buckets)) << "per step of " << s.buckets << " buckets";
    }
  }
}

// Bound: through the host's all-gather a bucket makes one: its selection comes to the host (the
// count, the pairs and the report in one pinned block, one wait); the others' pairs go up queued.
TEST(SyncBounds, HostGatherMakesOneSynchronizationPerBucket) {
  DevicesBehind behind;
  for (const std::string& method : kDeviceMethods) {
    SCOPED_TRACE(method);
    for (const WorkerRun& r : run_all(method, false)) {
      for (const StepStats& s : r.steps) {
        EXPECT_LE(s.host_syncs, std::uint64_t(s.buckets)) << "per step of " << s.buckets << " buckets";
        EXPECT_GT(s.host_device_gathered_bytes, 0u) << "the other worker's pairs went up";
      }
      EXPECT_LE(r.device_syncs, 3u * 2u);
    }
  }
}

// Bound: one selection on data already on the device (gradscope.select on a CUDA tensor, a
// compressor's compress_resident) waits once, for its result.
TEST(SyncBounds, OneSelectionOnDeviceDataMakesOneSynchronization) {
  DevicesBehind behind;
  const auto g = laplace(200000, 5);
  const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), 3);
  const gs::kernels::CallerStream caller(3, ch::caller_stream(3));
  for (const std::string& method : kDeviceMethods) {
    SCOPED_TRACE(method);
    auto c = make_compressor(method, 0.01, {.backend = "cuda-host"});
    for (int call = 0; call < 2; ++call) {  // the first call makes the workspace; so does neither wait
      const std::uint64_t s0 = gs::kernels::host_syncs();
      const Compressed r = c->compress_resident(g.data(), g.size(), "t");
      EXPECT_LE(gs::kernels::host_syncs() - s0, 1u) << "call " << call;
      EXPECT_GT(r.payload.count(), 0u);
    }
  }
  auto sel = gs::kernels::make_selector(gs::kernels::BackendKind::cuda_host);
  gs::kernels::Selection<std::int32_t> out;
  std::uint64_t s0 = gs::kernels::host_syncs();
  sel->sidco(g.data(), g.size(), 0.01, gs::fitting::SidcoVariant::gamma_pareto, 2, {}, out);
  EXPECT_LE(gs::kernels::host_syncs() - s0, 1u) << "Selector::sidco";
  s0 = gs::kernels::host_syncs();
  sel->topk(g.data(), g.size(), 2000, out);
  EXPECT_LE(gs::kernels::host_syncs() - s0, 1u) << "Selector::topk";
}

// The device's decisions give what the host's give: a worker's NaN skips the bucket on every
// worker (zeros, residuals kept, the step counted as skipped), to the bit as the host path.
TEST(DeviceDecisions, ASkipDecidedOnTheDeviceIsTheHostsSkip) {
  DevicesBehind behind;
  const auto device = run_all("sidco-e", true, 4, {}, 0.01, 1);
  const auto host = run_all("sidco-e", false, 4, {}, 0.01, 1);
  for (std::size_t r = 0; r < 2; ++r) {
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(device[r].updates[std::size_t(s)], host[r].updates[std::size_t(s)]) << "worker " << r << " step " << s;
      EXPECT_EQ(device[r].steps[std::size_t(s)].skipped, s == 1) << "step " << s;
    }
  }
}

// With device collectives a selection larger than the all-gather's capacity (twice the target) is
// capped alike on every worker (its lowest indices sent, the rest left in the residual), and the
// overflow is counted in the step's statistics. SIDCo as published (no count correction), one
// stage at density 0.001 on Pareto-tailed values: an exponential fit overshoots about tenfold.
TEST(DeviceDecisions, AnOverflowIsCappedAlikeAndCounted) {
  std::vector<WorkerRun> runs(2);
  CompressorOptions o;
  o.sidco_as_published = true;
  o.stages = 1;
  run_workers(2, [&](Collectives& comm) {
    CompressorOptions mine = o;
    mine.backend = "cuda-host";
    BucketCompressor bc(make_compressor("sidco-e", 0.001, mine), {});
    ThreadDeviceCollectives dc(comm);
    const int dev = comm.rank() + 1;
    std::mt19937_64 rng(90 + std::uint64_t(comm.rank()));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> g(100000);
    for (auto& v : g) v = std::pow(1.0f - u(rng), -1.0f / 1.5f) * (u(rng) < 0.5f ? -1.0f : 1.0f);
    const ch::DeviceMemory on(g.data(), g.size() * sizeof(float), dev);
    const gs::kernels::CallerStream caller(dev, ch::caller_stream(dev));
    bc.exchange_resident({0, g.data(), g.size(), gs::kernels::BackendKind::cuda_host, dev},
                         std::vector<BucketParam>{{1, 100000}}, comm, &dc, true);
    runs[std::size_t(comm.rank())].updates.push_back(g);
    runs[std::size_t(comm.rank())].steps.assign(bc.history().begin(), bc.history().end());
    EXPECT_GT(bc.summary().overflow_per_step, 0.0);
  });
  EXPECT_EQ(runs[0].updates, runs[1].updates) << "every worker adds the same capped pairs";
  for (const WorkerRun& r : runs) {
    const StepStats& s = r.steps.at(0);
    EXPECT_EQ(s.selected, 2u * 100u) << "the capacity: twice the target count";
    EXPECT_GT(s.overflow, 5u * 100u) << "an exponential fit on a Pareto tail overshoots";
  }
}

// Pinned staging: an upload returns at once (no synchronization) from a pinned block; a block whose
// copy is still in flight is passed over for another, never waited for; once a synchronization says
// the copy is done, the block is reused.
TEST(Staging, UploadsDoNotWaitAndReuseBlocksOnlyOnceDone) {
  DevicesBehind behind;
  std::thread worker([] {  // a fresh thread: its own staging pool
    auto ops = gs::kernels::make_vector_ops(gs::kernels::BackendKind::cuda_host, 4);
    ops->bind_thread();
    auto d = ops->floats(1000);
    const std::vector<float> host(1000, 1.5f);
    const std::uint64_t s0 = gs::kernels::host_syncs(), a0 = ch::staging_allocations();
    ops->upload(d.data(), host.data(), 4000);
    ops->upload(d.data(), host.data(), 4000);
    EXPECT_EQ(gs::kernels::host_syncs(), s0) << "uploads wait for nothing";
    EXPECT_EQ(ch::staging_allocations() - a0, 2u) << "the first block's copy is in flight: a second block";
    std::vector<float> back(1000);
    ops->download(back.data(), d.data(), 4000);  // waits: every copy queued is done
    EXPECT_EQ(back, host);
    const std::uint64_t a1 = ch::staging_allocations();
    ops->upload(d.data(), host.data(), 4000);
    EXPECT_EQ(ch::staging_allocations(), a1) << "a block whose copy is done is reused";
  });
  worker.join();
}

// CUB's temporary storage comes from the Selector's workspace: after the first call of a size, a
// selection allocates none (the CUDA backend would otherwise allocate it in every CUB call).
TEST(Staging, CubScratchLivesInTheSelectorsWorkspace) {
  const auto g = laplace(100000, 8);
  auto sel = gs::kernels::make_selector(gs::kernels::BackendKind::cuda_host);
  const float* d = sel->place(g);
  gs::kernels::Selection<std::int32_t> out;
  sel->sidco(d, g.size(), 0.01, gs::fitting::SidcoVariant::exponential, 2, {}, out);
  sel->topk(d, g.size(), 1000, out);
  const std::uint64_t before = ch::scratch_allocations();
  for (int i = 0; i < 3; ++i) {
    sel->sidco(d, g.size(), 0.01, gs::fitting::SidcoVariant::exponential, 2, {}, out);
    sel->topk(d, g.size(), 1000, out);
    sel->above(d, g.size(), 0.01, out);
  }
  EXPECT_EQ(ch::scratch_allocations(), before);
}

// What a bucket queues on its device (StepStats: launches and the rest; kernels::DeviceWork),
// counted by the cuda-host backend as the CUDA backend queues it, per bucket of the two above
// (57,700 and 7,700 elements) at density 0.01, two workers, the steps after the first, with device
// collectives and through the host (Gloo). docs/gpu.md ("What a bucket launches") gives the figures
// and the targets: sidco-e at most 16 launches a bucket, sidco-topk at most 24, none of one thread,
// no allocation, event or scratch-size query. Each is a bound: a launch, a pass, a single-thread
// merge, an allocation, an event or a CUB dispatch added to a bucket's path fails it.
struct Ledger {
  std::uint64_t launches, single, allocations, events, queries;
  double reads;  // elements the passes went over, per element of the step's buckets
};
// A stage's reduction, merge and decision in one launch (reduce_then); a radix select in three
// launches, its histograms reading only where the decisions chose it; each selection, with its
// decision, in one launch that reads nothing where its gate is closed (select_then), the exact
// top-k's keys above its k-th and its ties in one; the accumulate leaving the bucket zeroed for the
// sum; the first worker's adds deciding the skip; the sent pairs zeroed with the report written.
// Passes vary from step to step: SIDCo-E reads its bucket once more where its count correction
// moved the threshold (6.0 at most here), DGC four times more where its hierarchical step runs.
const std::map<std::string, Ledger> kLedgerToday = {{"sidco-e", {16, 0, 0, 0, 0, 6.0}},
                                                    {"topk", {11, 0, 0, 0, 0, 7.1}},
                                                    {"dgc", {17, 0, 0, 0, 0, 7.7}},
                                                    {"sidco-topk", {24, 0, 0, 0, 0, 4.0}}};

TEST(DeviceWork, EachBucketQueuesNoMoreThanItsLedger) {
  for (const bool device_comm : {true, false}) {
    for (const auto& [method, bound] : kLedgerToday) {
      SCOPED_TRACE(method + (device_comm ? " (device collectives)" : " (through the host)"));
      const auto runs = run_all(method, device_comm, 4);
      for (const WorkerRun& r : runs) {
        ASSERT_EQ(r.steps.size(), 4u);
        for (std::size_t i = 1; i < r.steps.size(); ++i) {
          const StepStats& s = r.steps[i];
          const auto per = [&](std::uint64_t v) { return double(v) / s.buckets; };
          EXPECT_LE(per(s.launches), bound.launches) << "step " << i;
          EXPECT_GT(s.launches, 0u) << "the bucket's kernels are counted";
          EXPECT_LE(per(s.single_thread_launches), bound.single) << "step " << i;
          EXPECT_LE(per(s.allocations), bound.allocations) << "step " << i;
          EXPECT_LE(per(s.events_created), bound.events) << "step " << i;
          EXPECT_LE(per(s.scratch_queries), bound.queries) << "step " << i;
          EXPECT_LE(double(s.elements_passed) / double(s.n), bound.reads + 0.01) << "step " << i;
          EXPECT_GE(double(s.elements_passed) / double(s.n), 1.0) << "a selection reads its bucket";
        }
      }
    }
  }
}

// GS_PRINT_LEDGER=1 prints the ledger per bucket (worker 0, steps after the first; docs/gpu.md).
TEST(DeviceWork, PrintsTheLedgerWhenAsked) {
  if (!std::getenv("GS_PRINT_LEDGER")) GTEST_SKIP() << "GS_PRINT_LEDGER unset";
  std::printf("| method | path | launches | of one thread | allocations | events | CUB queries | passes |\n");
  for (const std::string method : {"sidco-e", "topk", "dgc", "sidco-topk"}) {
    for (const bool device_comm : {true, false}) {
      const auto runs = run_all(method, device_comm, 4);
      double l = 0, one = 0, a = 0, e = 0, q = 0, passed = 0, n = 0, buckets = 0;
      for (std::size_t i = 1; i < runs[0].steps.size(); ++i) {
        const StepStats& s = runs[0].steps[i];
        l += double(s.launches), one += double(s.single_thread_launches), a += double(s.allocations);
        e += double(s.events_created), q += double(s.scratch_queries), passed += double(s.elements_passed);
        n += double(s.n), buckets += double(s.buckets);
      }
      std::printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", method.c_str(),
                  device_comm ? "device collectives" : "through the host (Gloo)", l / buckets, one / buckets,
                  a / buckets, e / buckets, q / buckets, passed / n);
    }
  }
}

// A steady state: from the second step on every step queues the same kernels, allocations, events
// and queries (nothing grows), and
// the first queues more (the workspaces and staging blocks it makes once).
TEST(DeviceWork, StepsAfterTheFirstQueueTheSame) {
  for (const bool device_comm : {true, false}) {
    for (const std::string& method : kDeviceMethods) {
      SCOPED_TRACE(method + (device_comm ? " (device collectives)" : " (host gather)"));
      const auto runs = run_all(method, device_comm, 4);
      const auto& st = runs[0].steps;
      ASSERT_EQ(st.size(), 4u);
      EXPECT_GT(st[0].allocations, st[1].allocations) << "the first step makes what later steps reuse";
      for (std::size_t i = 2; i < st.size(); ++i) {
        EXPECT_EQ(st[i].launches, st[1].launches) << "step " << i;
        EXPECT_EQ(st[i].single_thread_launches, st[1].single_thread_launches);
        EXPECT_EQ(st[i].allocations, st[1].allocations);
        EXPECT_EQ(st[i].events_created, st[1].events_created);
        EXPECT_EQ(st[i].scratch_queries, st[1].scratch_queries);
        // passes over a selection's candidates go with the data, and a radix select over the bucket
        // (three histograms read only where the device's decisions chose it: DGC's hierarchical
        // step, say) runs in some steps and not in others; the bucket's other passes do not vary
        EXPECT_NEAR(double(st[i].elements_passed), double(st[1].elements_passed), 3.01 * double(st[1].n));
      }
    }
  }
}

// CUB's dispatches by their kernels (CCCL 3.0's, kernels::work::cub_kernels): nothing for no
// items; a reduction or a sort that fits one tile, one single-tile kernel; a selection or a
// histogram, always its initialisation and its sweep.
TEST(DeviceWork, CubDispatchesCountTheirKernels) {
  using gs::kernels::work::Cub;
  using gs::kernels::work::cub_kernels;
  EXPECT_EQ(cub_kernels(Cub::select, 0, 32), 0u);
  EXPECT_EQ(cub_kernels(Cub::reduce, 4096, 32), 1u);
  EXPECT_EQ(cub_kernels(Cub::reduce, 4097, 32), 2u);
  EXPECT_EQ(cub_kernels(Cub::select, 1 << 20, 32), 2u);
  EXPECT_EQ(cub_kernels(Cub::select, 100, 32), 2u);
  EXPECT_EQ(cub_kernels(Cub::histogram, 100, 32), 2u);
  EXPECT_EQ(cub_kernels(Cub::radix_sort, 2048, 32), 1u);
  EXPECT_EQ(cub_kernels(Cub::radix_sort, 1 << 20, 32), 12u);  // 4 + 2 per 8-bit pass
  EXPECT_EQ(cub_kernels(Cub::radix_sort, 1 << 20, 11), 8u);
  const auto w0 = gs::kernels::device_work();
  gs::kernels::work::cub(Cub::select, 1 << 20);
  gs::kernels::work::launch(1, 1);
  const auto w = gs::kernels::device_work() - w0;
  EXPECT_EQ(w.launches, 3u);
  EXPECT_EQ(w.single_thread_launches, 1u);
  EXPECT_EQ(w.scratch_queries, 0u) << "a dispatch's size query is counted where it is asked";
  EXPECT_EQ(w.elements_passed, std::uint64_t(1) << 20);
}

// A CUB dispatch's scratch size is asked once per thread for what sets it (algorithm, items, bits
// or bins, key and value bytes): the same call again asks nothing, another size or key type asks.
TEST(DeviceWork, ScratchSizesAreAskedOncePerKey) {
  using gs::kernels::work::Cub;
  std::thread([] {  // a fresh thread: nothing asked yet
    int asked = 0;
    const auto query = [&] { return std::uint64_t(100 + asked++); };
    const auto q0 = gs::kernels::device_work().scratch_queries;
    const gs::kernels::work::ScratchKey key{Cub::select, 1 << 20, 0, 4};
    EXPECT_EQ(gs::kernels::work::scratch_size(key, query), 100u);
    EXPECT_EQ(gs::kernels::work::scratch_size(key, query), 100u) << "remembered";
    EXPECT_EQ(gs::kernels::work::scratch_size({Cub::select, 1 << 20, 0, 8}, query), 101u) << "64-bit indices";
    EXPECT_EQ(gs::kernels::work::scratch_size({Cub::select, 1 << 19, 0, 4}, query), 102u) << "another size";
    EXPECT_EQ(gs::kernels::work::scratch_size({Cub::radix_sort, 1 << 20, 31, 4, 4}, query), 103u);
    EXPECT_EQ(gs::kernels::device_work().scratch_queries - q0, 4u);
    gs::kernels::work::forget_scratch_size(key);
    EXPECT_EQ(gs::kernels::work::scratch_size(key, query), 104u) << "a size CUB refused is asked again";
  })
      .join();
}
