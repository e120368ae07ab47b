// The cuFFT engine of gs/kernels/fft.hpp: host batches copied to pooled device buffers, one
// batched r2c or c2r plan per (length, batch) made on first use, results copied back. At most
// kMaxPlans plans are kept, the least recently used destroyed first. The plans share one work
// area from gradscope's pool (they run one at a time on the engine's stream), sized for the
// largest plan kept; cuFFT allocates none of its own. The engine stays on the device that was
// current when it was made. Every cuFFT and CUDA status becomes DeviceError.
#include <cufft.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>

#include "../lru_cache.hpp"
#include "cuda_common.cuh"
#include "gs/kernels/fft.hpp"

namespace gs::kernels::cuda {
namespace {

const char* cufft_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS:
      return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN:
      return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED:
      return "CUFFT_ALLOC_FAILED (out of device memory)";
    case CUFFT_INVALID_VALUE:
      return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR:
      return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED:
      return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED:
      return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE:
      return "CUFFT_INVALID_SIZE";
    default:
      return "cuFFT error";
  }
}

void check(cufftResult r, const char* expr, std::uint64_t len, std::uint64_t batch) {
  if (r != CUFFT_SUCCESS)
    throw DeviceError(std::string("real FFT (cuFFT): ") + cufft_name(r) + " (" + std::to_string(int(r)) + ") in " +
                          expr + " for " + std::to_string(batch) + " chunk(s) of " + std::to_string(len),
                      r == CUFFT_ALLOC_FAILED);
}

// Plans kept per engine. A model's tensors have a few distinct sizes, so its plans all stay; a
// caller going through many (length, batch) pairs (varying batch sizes, bucketed gradients) would
// otherwise keep a plan, and its device memory, for every pair it ever used.
constexpr std::size_t kMaxPlans = 16;

using PlanKey = std::tuple<std::uint64_t, std::uint64_t, int>;  // length, batch, cufftType
struct Plan {
  cufftHandle handle = 0;
  std::size_t work = 0;  // bytes of work area it needs
};

class CufftRealFft final : public RealFft {
 public:
  CufftRealFft() : device_(detail::policy().runtime().current_device()) {
    if (const std::string why = detail::policy().unusable_reason(device_); !why.empty())
      throw gs::Error("real FFT (cuFFT): " + why + "; use the CPU engine");
    GS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CufftRealFft() override {
    std::optional<DeviceGuard> guard;
    try {
      guard.emplace(detail::policy().runtime(), device_);
    } catch (const gs::Error&) {  // a destructor cannot report it: free what can be freed
    }
    plans_.clear();
    real_.reset();
    spec_.reset();
    work_.reset();
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CufftRealFft(const CufftRealFft&) = delete;
  CufftRealFft& operator=(const CufftRealFft&) = delete;

  BackendKind kind() const override { return BackendKind::cuda; }

  void forward(std::span<const float> in, std::uint64_t len, std::span<float> spectrum) override {
    const std::uint64_t batch = kernels::detail::check_fft_sizes("forward", in.size(), len, spectrum.size());
    if (batch == 0) return;
    DeviceGuard guard(detail::policy().runtime(), device_);
    reserve(in.size(), spectrum.size());
    copy_to_device(real_.data(), in.data(), in.size_bytes(), stream_);
    check(cufftExecR2C(plan(len, batch, CUFFT_R2C), real_.data(), reinterpret_cast<cufftComplex*>(spec_.data())),
          "cufftExecR2C", len, batch);
    copy_to_host(spectrum.data(), spec_.data(), spectrum.size_bytes(), stream_);  // synchronizes
  }

  void backward(std::span<const float> spectrum, std::uint64_t len, std::span<float> out) override {
    const std::uint64_t batch = kernels::detail::check_fft_sizes("backward", out.size(), len, spectrum.size());
    if (batch == 0) return;
    DeviceGuard guard(detail::policy().runtime(), device_);
    reserve(out.size(), spectrum.size());
    // c2r may overwrite its input: it is our device copy, never the caller's spectrum.
    copy_to_device(spec_.data(), spectrum.data(), spectrum.size_bytes(), stream_);
    check(cufftExecC2R(plan(len, batch, CUFFT_C2R), reinterpret_cast<cufftComplex*>(spec_.data()), real_.data()),
          "cufftExecC2R", len, batch);
    copy_to_host(out.data(), real_.data(), out.size_bytes(), stream_);
  }

 private:
  // Device buffers grow to the largest batch seen and are reused.
  void reserve(std::uint64_t real_floats, std::uint64_t spectrum_floats) {
    if (real_.size() < real_floats) real_ = DeviceBuffer<float>(real_floats, stream_);
    if (spec_.size() < spectrum_floats) spec_ = DeviceBuffer<float>(spectrum_floats, stream_);
  }

  cufftHandle plan(std::uint64_t len, std::uint64_t batch, cufftType type) {
    const PlanKey key{len, batch, int(type)};
    if (const Plan* kept = plans_.find(key)) return kept->handle;
    cufftHandle h = 0;
    check(cufftCreate(&h), "cufftCreate", len, batch);
    long long n[1] = {static_cast<long long>(len)};
    const long long bins = static_cast<long long>(RealFft::bins(len));
    const bool r2c = type == CUFFT_R2C;
    std::size_t work = 0;
    cufftResult r = cufftSetStream(h, stream_);
    if (r == CUFFT_SUCCESS) r = cufftSetAutoAllocation(h, 0);  // the shared work area instead
    // Basic layout: chunks back to back, len reals and bins complex values each.
    if (r == CUFFT_SUCCESS)
      r = cufftMakePlanMany64(h, 1, n, nullptr, 1, r2c ? n[0] : bins, nullptr, 1, r2c ? bins : n[0], type,
                              static_cast<long long>(batch), &work);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(h);
      check(r, "cufftSetStream/cufftMakePlanMany64", len, batch);
    }
    // Kept from here on (the cache destroys it on any way out), the least recently used plan
    // destroyed when kMaxPlans are kept already: every call synchronizes before returning, so
    // no work of that plan is still queued.
    const cufftHandle fresh = plans_.insert(key, Plan{h, work}).handle;
    try {
      fit_work_area(fresh, len, batch);
    } catch (...) {
      // Some plan may point at no area or a freed one: make them all again as needed.
      plans_.clear();
      throw;
    }
    return fresh;
  }

  // The one work area, sized for the largest plan kept: grown when the fresh plan needs more, and
  // shrunk when the plan that needed it was evicted, every plan then pointed at the new area (the
  // old one is freed in stream order, after the work queued on it); else the fresh plan alone.
  void fit_work_area(cufftHandle fresh, std::uint64_t len, std::uint64_t batch) {
    std::size_t needed = 0;
    plans_.for_each([&](const PlanKey&, const Plan& p) { needed = std::max(needed, p.work); });
    if (needed != work_.size()) {
      work_ = DeviceBuffer<unsigned char>(needed, stream_);  // empty when no plan needs any
      if (work_.data())
        plans_.for_each([&](const PlanKey&, const Plan& p) {
          check(cufftSetWorkArea(p.handle, work_.data()), "cufftSetWorkArea", len, batch);
        });
    } else if (work_.data()) {
      check(cufftSetWorkArea(fresh, work_.data()), "cufftSetWorkArea", len, batch);
    }
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  // Destroys each plan it lets go (on the engine's device: the callers hold a DeviceGuard).
  LruCache<PlanKey, Plan> plans_{kMaxPlans, [](const PlanKey&, Plan& p) { cufftDestroy(p.handle); }};
  DeviceBuffer<float> real_, spec_;
  DeviceBuffer<unsigned char> work_;  // shared by every plan
};

}  // namespace

std::unique_ptr<RealFft> make_real_fft() { return std::make_unique<CufftRealFft>(); }

}  // namespace gs::kernels::cuda
