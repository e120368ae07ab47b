// Backend choice and the shared argument checks.
#include "gs/kernels/backend.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "gs/base/enum_names.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/types.hpp"

#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::kernels {

std::string_view to_string(BackendKind kind) {
  static constexpr EnumName<BackendKind> kNames[] = {
      {BackendKind::cpu, "cpu"}, {BackendKind::cuda, "cuda"}, {BackendKind::cuda_host, "cuda-host"}};
  return enum_name(kNames, kind);
}

bool cuda_built() {
#if defined(GS_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
#if defined(GS_HAVE_CUDA)
  DevicePolicy& policy = cuda::device_policy();
  DeviceRuntime& rt = policy.runtime();
  return rt.device_count() > 0 && policy.unusable_reason(rt.current_device()).empty();
#else
  return false;
#endif
}

namespace {
std::atomic<std::uint64_t> probes{0};
}  // namespace

std::uint64_t backend_probes() { return probes.load(); }

void check_backend_name(std::string_view name) {
  if (name != "cpu" && name != "cuda-host" && name != "auto" && name != "cuda")
    throw gs::Error("unknown backend '" + std::string(name) + "': use auto, cpu or cuda (or cuda-host)");
  if (name == "cuda" && !cuda_built())
    throw gs::Error(
        "backend 'cuda': this build has no CUDA backend (configure with "
        "-DGS_ENABLE_CUDA=ON where nvcc is present), use --backend cpu or auto");
}

BackendKind resolve_backend(std::string_view name, [[maybe_unused]] int device) {
  check_backend_name(name);
  if (name == "cpu") return BackendKind::cpu;
  if (name == "cuda-host") return BackendKind::cuda_host;
#if defined(GS_HAVE_CUDA)
  ++probes;
  const DevicePolicy::Choice choice = cuda::device_policy().choose(name, device);
  if (!choice.warning.empty()) std::fprintf(stderr, "gradscope: warning: %s\n", choice.warning.c_str());
  return choice.kind;
#else
  return BackendKind::cpu;
#endif
}

std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(std::span<const float> host_data, BackendKind kind) {
  if (kind == BackendKind::cuda) {
#if defined(GS_HAVE_CUDA)
    return cuda::make_device_passes(host_data);
#else
    throw gs::Error("backend 'cuda': this build has no CUDA backend; use the CPU backend");
#endif
  }
  if (kind == BackendKind::cuda_host) return cuda_host::make_passes(host_data);
  return std::make_unique<cpu::CpuPasses>(host_data);
}

double LogHistogram::edge(std::size_t i) const {
  if (counts.empty()) return lo;
  return lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(counts.size()));
}

void check_log_histogram_args(double lo, double hi, int bins) {
  if (!(lo > 0.0) || !std::isfinite(hi) || !(hi > lo))
    throw gs::Error("log_histogram: need 0 < lo < hi, both finite (got lo = " + std::to_string(lo) +
                    ", hi = " + std::to_string(hi) + ")");
  if (bins < 1 || bins > (1 << 20))
    throw gs::Error("log_histogram: bins must be in [1, 1048576] (got " + std::to_string(bins) + ")");
}

void check_threshold(double threshold, const char* what) {
  if (std::isnan(threshold)) throw gs::Error(std::string(what) + ": the threshold is NaN; pass a number (>= 0)");
}

}  // namespace gs::kernels
