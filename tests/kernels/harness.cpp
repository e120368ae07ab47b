// The backends of the table-driven tests: cpu, cuda (run where a GPU is) and cuda-host (the CUDA
// backend's pass code on the host, run everywhere).
#include "harness.hpp"

#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::testing {
namespace {

using gs::kernels::BackendKind;

template <class T>
bool guards_intact(const std::vector<T>& all, std::size_t n) {
  for (std::size_t i = 0; i < kGuard; ++i) {
    const T a = all[i], b = all[kGuard + n + i];
    if constexpr (std::is_same_v<T, float>) {
      if (!is_poison(a) || !is_poison(b)) return false;
    } else {
      if (a != T(kPoisonIndex) || b != T(kPoisonIndex)) return false;
    }
  }
  return true;
}

// Host buffers of `capacity` between guards; call(indices, values) writes m and returns m.
template <class Index, class Call>
Picked run_guarded(const std::string& name, std::uint64_t capacity, Call call) {
  std::vector<Index> idx(capacity + 2 * kGuard, Index(kPoisonIndex));
  std::vector<float> val(capacity + 2 * kGuard, poison_float());
  const std::uint64_t m = call(idx.data() + kGuard, val.data() + kGuard);
  EXPECT_TRUE(guards_intact(idx, capacity)) << name << ": index guard overwritten";
  EXPECT_TRUE(guards_intact(val, capacity)) << name << ": value guard overwritten";
  Picked p;
  p.indices.assign(idx.begin() + kGuard, idx.begin() + kGuard + m);
  p.values.assign(val.begin() + kGuard, val.begin() + kGuard + m);
  return p;
}

// Both index widths through one generic call.
template <class Call>
Picked either_width(const std::string& name, std::uint64_t capacity, bool int64, Call call) {
  return int64 ? run_guarded<std::int64_t>(name, capacity, call) : run_guarded<std::int32_t>(name, capacity, call);
}

class CpuOps final : public BackendOps {
 public:
  std::string name() const override { return "cpu"; }
  Picked compact(std::span<const float> g, double t, std::uint64_t capacity, bool int64) override {
    return either_width(name(), capacity, int64, [&](auto* idx, float* val) {
      return gs::kernels::cpu::compact_above(g, t, std::span(idx, capacity), std::span(val, capacity));
    });
  }
  Picked topk(std::span<const float> g, std::uint64_t k, bool int64) override {
    return either_width(name(), k, int64, [&](auto* idx, float* val) {
      gs::kernels::cpu::topk(g, k, std::span(idx, k), std::span(val, k));
      return k;
    });
  }
  gs::kernels::LogHistogram histogram(std::span<const float> g, double lo, double hi, int bins) override {
    return gs::kernels::cpu::log_histogram(g, lo, hi, bins);
  }
  double sum(std::span<const float> g) override { return gs::kernels::cpu::sum(g); }
  float kth_largest(std::span<const float> g, std::uint64_t k) override { return gs::kernels::cpu::kth_largest(g, k); }
  std::uint64_t count_above(std::span<const float> g, double t) override { return gs::kernels::cpu::count_above(g, t); }
  std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed) override {
    return gs::kernels::cpu::random_sample(g, m, seed);
  }
  std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                    bool* subsampled) override {
    return gs::kernels::cpu::sorted_sample(g, max_points, seed, subsampled);
  }
};

namespace ch = gs::kernels::cuda_host;

class CudaHostOps final : public BackendOps {
 public:
  std::string name() const override { return "cuda-host"; }
  Picked compact(std::span<const float> g, double t, std::uint64_t capacity, bool int64) override {
    return either_width(name(), capacity, int64, [&](auto* idx, float* val) {
      return ch::compact_above(g.data(), g.size(), t, idx, val, capacity);
    });
  }
  Picked topk(std::span<const float> g, std::uint64_t k, bool int64) override {
    return either_width(name(), k, int64, [&](auto* idx, float* val) {
      ch::topk(g.data(), g.size(), k, idx, val);
      return k;
    });
  }
  gs::kernels::LogHistogram histogram(std::span<const float> g, double lo, double hi, int bins) override {
    return ch::log_histogram(g.data(), g.size(), lo, hi, bins);
  }
  double sum(std::span<const float> g) override { return ch::sum(g.data(), g.size()); }
  float kth_largest(std::span<const float> g, std::uint64_t k) override {
    return ch::kth_largest(g.data(), g.size(), k);
  }
  std::uint64_t count_above(std::span<const float> g, double t) override {
    return ch::count_above(g.data(), g.size(), t);
  }
  std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed) override {
    std::vector<float> out(m);
    ch::random_sample(g.data(), g.size(), m, seed, out.data());
    return out;
  }
  std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                    bool* subsampled) override {
    return ch::sorted_sample(g.data(), g.size(), max_points, seed, subsampled);
  }
};

#if defined(GS_HAVE_CUDA)
namespace cu = gs::kernels::cuda;

class CudaOps final : public BackendOps {
 public:
  std::string name() const override { return "cuda"; }
  Picked compact(std::span<const float> g, double t, std::uint64_t capacity, bool int64) override {
    return int64 ? run<std::int64_t>(g, capacity,
                                     [&](const float* d_g, auto* d_idx, float* d_val) {
                                       return cu::compact_above(d_g, g.size(), t, d_idx, d_val, capacity, nullptr);
                                     })
                 : run<std::int32_t>(g, capacity, [&](const float* d_g, auto* d_idx, float* d_val) {
                     return cu::compact_above(d_g, g.size(), t, d_idx, d_val, capacity, nullptr);
                   });
  }
  Picked topk(std::span<const float> g, std::uint64_t k, bool int64) override {
    return int64 ? run<std::int64_t>(g, k,
                                     [&](const float* d_g, auto* d_idx, float* d_val) {
                                       cu::topk(d_g, g.size(), k, d_idx, d_val, nullptr);
                                       return k;
                                     })
                 : run<std::int32_t>(g, k, [&](const float* d_g, auto* d_idx, float* d_val) {
                     cu::topk(d_g, g.size(), k, d_idx, d_val, nullptr);
                     return k;
                   });
  }
  gs::kernels::LogHistogram histogram(std::span<const float> g, double lo, double hi, int bins) override {
    const auto d_g = upload(g);
    return cu::log_histogram(d_g.data(), g.size(), lo, hi, bins, nullptr);
  }
  double sum(std::span<const float> g) override { return cu::sum(upload(g).data(), g.size(), nullptr); }
  float kth_largest(std::span<const float> g, std::uint64_t k) override {
    return cu::kth_largest(upload(g).data(), g.size(), k, nullptr);
  }
  std::uint64_t count_above(std::span<const float> g, double t) override {
    return cu::count_above(upload(g).data(), g.size(), t, nullptr);
  }
  std::vector<float> random_sample(std::span<const float> g, std::uint64_t m, std::uint64_t seed) override {
    const auto d_g = upload(g);
    cu::DeviceBuffer<float> d_out(m, nullptr);
    cu::random_sample(d_g.data(), g.size(), m, seed, d_out.data(), nullptr);
    return d_out.download();
  }
  std::vector<double> sorted_sample(std::span<const float> g, std::uint64_t max_points, std::uint64_t seed,
                                    bool* subsampled) override {
    return cu::sorted_sample(upload(g).data(), g.size(), max_points, seed, subsampled, nullptr);
  }

 private:
  static cu::DeviceBuffer<float> upload(std::span<const float> g) {
    cu::DeviceBuffer<float> d_g(g.size(), nullptr);
    d_g.upload(g);
    return d_g;
  }
  template <class Index, class Call>
  Picked run(std::span<const float> g, std::uint64_t capacity, Call call) {
    const auto d_g = upload(g);
    std::vector<Index> idx_host(capacity + 2 * kGuard, Index(kPoisonIndex));
    std::vector<float> val_host(capacity + 2 * kGuard, poison_float());
    cu::DeviceBuffer<Index> d_idx(idx_host.size(), nullptr);
    cu::DeviceBuffer<float> d_val(val_host.size(), nullptr);
    d_idx.upload(idx_host);
    d_val.upload(val_host);
    const std::uint64_t m = call(d_g.data(), d_idx.data() + kGuard, d_val.data() + kGuard);
    idx_host = d_idx.download();
    val_host = d_val.download();
    EXPECT_TRUE(guards_intact(idx_host, capacity)) << "cuda: index guard overwritten";
    EXPECT_TRUE(guards_intact(val_host, capacity)) << "cuda: value guard overwritten";
    Picked p;
    p.indices.assign(idx_host.begin() + kGuard, idx_host.begin() + kGuard + m);
    p.values.assign(val_host.begin() + kGuard, val_host.begin() + kGuard + m);
    return p;
  }
};
#endif

}  // namespace

std::vector<BackendKind> all_backends() { return {BackendKind::cpu, BackendKind::cuda, BackendKind::cuda_host}; }

std::string backend_param_name(const ::testing::TestParamInfo<BackendKind>& info) {
  std::string s(gs::kernels::to_string(info.param));
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

void BackendTest::SetUp() {
  if (GetParam() != BackendKind::cuda) return;
  if (!gs::kernels::cuda_built()) GTEST_SKIP() << "this build has no CUDA backend (its logic runs as cuda_host)";
  if (!gs::kernels::cuda_available())
    GTEST_SKIP() << "no usable GPU on this machine: CUDA suites run on a GPU machine "
                    "(scripts/gpu-check.sh); the same pass code runs here as cuda_host";
}

std::unique_ptr<BackendOps> make_ops(BackendKind kind) {
  switch (kind) {
    case BackendKind::cpu:
      return std::make_unique<CpuOps>();
    case BackendKind::cuda_host:
      return std::make_unique<CudaHostOps>();
    case BackendKind::cuda:
#if defined(GS_HAVE_CUDA)
      return std::make_unique<CudaOps>();
#else
      break;
#endif
  }
  throw gs::Error("make_ops: backend not built");
}

}  // namespace gs::testing
