// The CUDA backend's rules that host runs can show, on its portable pass code (white-box: the
// primitives are wrapped to guard every buffer and to change the vector between passes):
// selections bounded by capacity, the numerical policy across device sizes, and device errors
// reaching the caller through a compressor instead of switching it to its fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda_host/host_prims.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "harness.hpp"
#include "portable/passes.hpp"

namespace gs::testing {
namespace {

using gs::kernels::cuda_host::HostPrims;
namespace portable = gs::kernels::portable;

constexpr unsigned char kGuardByte = 0xAB;
int damaged_buffers = 0;  // GuardedBuffers whose guard was written

// A host buffer followed by guard bytes, checked when it goes.
template <class T>
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(std::size_t count) : bytes_((count + kGuard) * sizeof(T), kGuardByte), count_(count) {}
  GuardedBuffer(GuardedBuffer&&) noexcept = default;
  GuardedBuffer& operator=(GuardedBuffer&& o) noexcept {
    check();
    bytes_ = std::move(o.bytes_);
    count_ = o.count_;
    o.count_ = 0;
    return *this;
  }
  ~GuardedBuffer() { check(); }
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  std::size_t size() const { return count_; }

 private:
  void check() const {
    if (bytes_.size() != (count_ + kGuard) * sizeof(T)) return;  // moved from
    for (std::size_t b = count_ * sizeof(T); b < bytes_.size(); ++b)
      if (bytes_[b] != kGuardByte) {
        ++damaged_buffers;
        return;
      }
  }
  std::vector<unsigned char> bytes_;
  std::size_t count_ = 0;
};

// The host primitives with guarded buffers, and a hook run after each histogram pass (a writer
// changing the vector between the passes of one call).
struct GuardedPrims : HostPrims {
  template <class T>
  using Buffer = GuardedBuffer<T>;
  template <class T>
  Buffer<T> alloc(std::size_t count) const {
    return Buffer<T>(count);
  }
  template <class Digit, class Then>
  void gated_histogram_then(std::uint64_t n, const Digit& digit, int bins, unsigned long long* counts,
                            const std::int32_t* gate, std::int32_t open, std::uint32_t* done, const Then& then) const {
    HostPrims::gated_histogram_then(n, digit, bins, counts, gate, open, done, then);
    if (after_histogram) after_histogram();
  }
  std::function<void()> after_histogram;
};

TEST(CudaHostDevice, CompactionWritesNothingPastCapacity) {
  const auto g = make_data(Shape::laplace, 10000, 11);
  const std::uint64_t need = gs::kernels::cuda_host::count_above(g.data(), g.size(), 1e-3);
  ASSERT_GT(need, 100u);
  const std::uint64_t capacity = need / 2;
  damaged_buffers = 0;
  {
    GuardedBuffer<std::int32_t> idx(capacity);
    GuardedBuffer<float> val(capacity);
    GuardedPrims p;
    try {
      portable::compact_above(p, g.data(), g.size(), 1e-3, idx.data(), val.data(), capacity);
      ADD_FAILURE() << "a selection larger than capacity must throw";
    } catch (const gs::Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(need) + " are needed"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(damaged_buffers, 0) << "the selection wrote past capacity";
}

TEST(CudaHostDevice, TopkOnAVectorChangedBetweenPassesStopsWithinItsBuffers) {
  auto g = make_data(Shape::laplace, 20000, 12);
  const std::uint64_t k = 200;
  const float kth = gs::kernels::cuda_host::kth_largest(g.data(), g.size(), k);
  damaged_buffers = 0;
  GuardedPrims p;
  // After the histogram counted the k-th bin, every element moves into that bin.
  p.after_histogram = [&] {
    for (auto& v : g) v = kth;
  };
  {
    GuardedBuffer<std::int64_t> idx(k);
    GuardedBuffer<float> val(k);
    try {
      portable::topk(p, g.data(), g.size(), k, idx.data(), val.data());
      ADD_FAILURE() << "topk must notice that the selection found more than the histogram counted";
    } catch (const gs::Error& e) {
      EXPECT_NE(std::string(e.what()).find("modified while it was read"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(damaged_buffers, 0) << "the candidates' selection wrote past its buffer";
}

// The documented numerical policy: per-element formulas round the same everywhere (no FMA
// contraction on either side), and the grid-stride reduction's partition follows the device's SM
// count, so counts, zeros, non-finite counts, min and max are exact across devices and the sums
// agree to 1e-12 of the sum of their terms' magnitudes (docs/architecture.md, "Numerics").
TEST(CudaHostDevice, StatisticsAcrossDeviceSizesWithinTheStatedTolerance) {
  const auto g = make_data(Shape::specials, 1'000'003, 13);
  HostPrims two(2);
  const fitting::MagnitudeStats small = portable::stats(two, g.data(), g.size());
  for (const int sms : {1, 40, 80, 132}) {
    HostPrims p(sms);
    const fitting::MagnitudeStats s = portable::stats(p, g.data(), g.size());
    EXPECT_EQ(s.count, small.count) << sms;
    EXPECT_EQ(s.zeros, small.zeros) << sms;
    EXPECT_EQ(s.nonfinite, small.nonfinite) << sms;
    EXPECT_EQ(s.min, small.min) << sms;
    EXPECT_EQ(s.max, small.max) << sms;
    constexpr double kTol = 1e-12;
    EXPECT_LE(std::abs(s.sum - small.sum), kTol * small.sum) << sms;
    EXPECT_LE(std::abs(s.sum_sq - small.sum_sq), kTol * small.sum_sq) << sms;
    EXPECT_LE(std::abs(s.sum_log - small.sum_log), kTol * std::abs(small.sum_log)) << sms;
    EXPECT_LE(std::abs(s.sum_signed - small.sum_signed), kTol * small.sum) << sms;
  }
}

// Injects one out-of-memory into the cuda-host backend for its lifetime.
struct InjectedOutOfMemory {
  explicit InjectedOutOfMemory(std::int64_t after) { gs::kernels::cuda_host::fail_allocation_after(after); }
  ~InjectedOutOfMemory() { gs::kernels::cuda_host::fail_allocation_after(-1); }
};

// Rule: above() and sidco-topk take their n-sized buffers (indices and values, candidates) from the
// Selector's workspace, kept from call to call on the device: past the pool's release threshold a
// fresh n-sized buffer each call would be a driver allocation each call.
TEST(CudaHostDevice, SelectionsReuseTheirWorkspace) {
  const auto g = make_data(Shape::laplace, 100000, 15);
  auto sel = gs::kernels::make_selector(gs::kernels::BackendKind::cuda_host);
  const float* d = sel->place(g);
  gs::kernels::Selection<std::int32_t> out;
  sel->above(d, g.size(), 0.01, out);
  sel->sidco_topk(d, g.size(), 0.01, 2, out);
  const std::uint64_t before = gs::kernels::cuda_host::allocated_bytes();
  {
    InjectedOutOfMemory oom(0);  // any allocation now fails
    sel->above(d, g.size(), 0.01, out);
  }
  const auto resident = sel->resident_selection();
  EXPECT_EQ(resident.count, out.indices.size());
  EXPECT_EQ(std::vector<std::int32_t>(resident.indices, resident.indices + resident.count), out.indices)
      << "the last selection stays where it was made";
  sel->sidco_topk(d, g.size(), 0.01, 2, out);
  EXPECT_LT(gs::kernels::cuda_host::allocated_bytes() - before, 4 * g.size())
      << "sidco-topk's n candidates come from the workspace";
}

// select_then's contract (passes.hpp) on cuda-host: values above `above` taken, values equal to
// `tie` kept while fewer than `limit` came before, in index order; weights summed over every value
// read.
struct TestSel {
  const float* x;
  std::uint64_t n;
  bool on;
  float above, tie;
  std::uint64_t limit;
  struct Bound {
    bool on;
    std::uint64_t len;
    const float* x;
    float above, tie;
    std::uint64_t lim;
    unsigned flags(std::uint64_t i) const {
      return x[i] > above ? portable::kTake : (x[i] == tie ? portable::kTie : 0u);
    }
    std::uint64_t tie_limit() const { return lim; }
    std::int64_t index(std::uint64_t i) const { return std::int64_t(i); }
    float value(std::uint64_t i) const { return x[i]; }
    double weight(std::uint64_t i) const { return double(x[i]); }
  };
  Bound bind() const { return {on, n, x, above, tie, limit}; }
};

TEST(CudaHostDevice, SelectThenKeepsTheOrderTheTiesLimitAndTheCapacity) {
  HostPrims p;
  const std::uint64_t n = 50000;
  std::vector<float> x(n);
  for (std::uint64_t i = 0; i < n; ++i) x[i] = float((i * 7919) % 100);  // 0..99, each 500 times
  portable::SelectRoomBuffers<HostPrims> room;
  room.reserve(p, n);
  const auto run = [&](const TestSel& sel, std::uint64_t capacity, std::vector<std::int32_t>& out, std::uint64_t& count,
                       double& weight, std::uint64_t& then_count) {
    out.assign(n, -1);
    std::vector<float> values(n, -1.0f);
    p.select_then(n, sel, out.data(), values.data(), capacity, &count, &weight, room.next(),
                  [&](std::uint64_t m) { then_count = m; });
    for (std::uint64_t j = 0; j < n && out[j] >= 0; ++j) EXPECT_EQ(values[j], x[std::size_t(out[j])]) << j;
  };
  // The reference: in index order, every value above 97, and the first 123 values of 97.
  std::vector<std::int32_t> want;
  std::uint64_t ties = 0;
  double sum = 0.0;
  for (std::uint64_t i = 0; i < n; ++i) {
    sum += x[i];
    if (x[i] > 97.0f || (x[i] == 97.0f && ties++ < 123)) want.push_back(std::int32_t(i));
  }
  std::vector<std::int32_t> out;
  std::uint64_t count = 0, then_count = 7;
  double weight = 0.0;
  run({x.data(), n, true, 97.0f, 97.0f, 123}, n, out, count, weight, then_count);
  ASSERT_EQ(count, want.size());
  EXPECT_EQ(count, 1000u + 123u);
  EXPECT_EQ(then_count, count);
  EXPECT_EQ(std::vector<std::int32_t>(out.begin(), out.begin() + std::ptrdiff_t(count)), want);
  EXPECT_EQ(out[count], -1) << "nothing written past the count";
  EXPECT_DOUBLE_EQ(weight, sum);
  // A capacity below the count: the first `capacity` written, the full count reported.
  run({x.data(), n, true, 97.0f, 97.0f, 123}, 100, out, count, weight, then_count);
  EXPECT_EQ(count, want.size());
  EXPECT_EQ(std::vector<std::int32_t>(out.begin(), out.begin() + 100),
            std::vector<std::int32_t>(want.begin(), want.begin() + 100));
  EXPECT_EQ(out[100], -1);
  // Closed: nothing read or written, the count left as it was, then(0).
  const gs::kernels::DeviceWork w0 = gs::kernels::device_work();
  count = 42;
  run({x.data(), n, false, 97.0f, 97.0f, 123}, n, out, count, weight, then_count);
  const gs::kernels::DeviceWork w = gs::kernels::device_work() - w0;
  EXPECT_EQ(count, 42u);
  EXPECT_EQ(then_count, 0u);
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(w.launches, 1u);
  EXPECT_EQ(w.elements_passed, 0u);
}

TEST(CudaHostDevice, SelectThenReadsAChunkAgainOnlyWhereItsHitsOverflowTheBlocksRoom) {
  HostPrims p;                                               // a 2-SM device's grid: 16 blocks
  const std::uint64_t n = 16 * 2 * portable::kSelectStaged;  // chunks of twice the hits a block keeps
  std::vector<float> x(n, 1.0f);
  portable::SelectRoomBuffers<HostPrims> room;
  room.reserve(p, n);
  std::vector<std::int32_t> out(n);
  std::uint64_t count = 0;
  const auto elements = [&](float above) {
    const gs::kernels::DeviceWork w0 = gs::kernels::device_work();
    p.select_then(n, TestSel{x.data(), n, true, above, -1.0f, 0}, out.data(), static_cast<float*>(nullptr), n, &count,
                  static_cast<double*>(nullptr), room.next(), portable::NoStep{});
    return (gs::kernels::device_work() - w0).elements_passed;
  };
  EXPECT_EQ(elements(2.0f), n) << "no hits: one read";
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(elements(0.0f), 2 * n) << "every value a hit: each block reads its chunk again";
  EXPECT_EQ(count, n);
  for (std::uint64_t j = 0; j < n; ++j) ASSERT_EQ(out[j], std::int32_t(j));
}

TEST(CudaHostDevice, CompressorsLetDeviceErrorsThroughAndFallBackOnlyOnDegenerateVectors) {
  const auto g = make_data(Shape::laplace, 100000, 14);
  for (const char* method : {"sidco-e", "sidco-topk", "dgc", "gaussianksgd"}) {
    SCOPED_TRACE(method);
    auto c = gs::compress::make_compressor(method, 0.01, {.backend = "cuda-host"});
    {
      // The first allocation stages the vector; the next is inside the method (its workspace,
      // made on the first call and reused after).
      InjectedOutOfMemory oom(1);
      try {
        c->compress(g, "t");
        ADD_FAILURE() << "an out-of-memory inside the threshold's passes must reach the caller";
      } catch (const gs::kernels::DeviceError& e) {
        EXPECT_TRUE(e.out_of_memory());
        EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
      }
    }
    // A vector of zeros has nothing to fit: the fallback (exact top-k of what is there) runs,
    // without an error; whatever it selects is zero.
    const std::vector<float> zeros(4096, 0.0f);
    const auto r = c->compress(zeros, "zeros");
    EXPECT_LE(r.payload.indices.size(), 41u);
    for (const float v : r.payload.values) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace gs::testing
