// Real FFT engines (gs/kernels/fft.hpp): the shared size checks, the FFTW3 engine of the CPU
// backend, and the factory. The cuFFT engine is in cuda/fft.cu.
#include "gs/kernels/fft.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "gs/base/error.hpp"
#ifndef GS_HAVE_FFTW3
#define GS_HAVE_FFTW3 0
#endif
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif
#if GS_HAVE_FFTW3
#include <fftw3.h>
#endif

namespace gs::kernels {

namespace detail {

std::uint64_t check_fft_sizes(const char* what, std::uint64_t real_size, std::uint64_t len,
                              std::uint64_t spectrum_size) {
  const std::string who = std::string("real FFT ") + what + ": ";
  if (len == 0) throw Error(who + "the chunk length is 0");
  if (real_size % len != 0)
    throw Error(who + std::to_string(real_size) + " real values are not a whole number of chunks of " +
                std::to_string(len));
  const std::uint64_t batch = real_size / len;
  if (spectrum_size != 2 * batch * RealFft::bins(len))
    throw Error(who + "the spectrum holds " + std::to_string(spectrum_size) + " floats; " + std::to_string(batch) +
                " chunks of " + std::to_string(len) + " need " + std::to_string(2 * batch * RealFft::bins(len)));
  return batch;
}

}  // namespace detail

namespace {

#if GS_HAVE_FFTW3

constexpr std::uint64_t kMaxFftwLength = std::uint64_t(1) << 30;  // FFTW takes int lengths

// 64-byte aligned storage: FFTW's new-array execute needs arrays aligned like the planning ones.
template <class T>
class Aligned {
 public:
  Aligned() = default;
  ~Aligned() { release(); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  void resize(std::size_t count) {
    if (count <= size_) return;
    release();
    data_ = static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t(64)));
    size_ = count;
  }
  T* data() const { return data_; }

 private:
  void release() {
    if (data_) ::operator delete[](data_, std::align_val_t(64));
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

struct Plans {
  fftwf_plan forward = nullptr;   // r2c
  fftwf_plan backward = nullptr;  // c2r (unnormalized)
};

// One plan pair per chunk length, shared by every engine of the process. Making and destroying
// FFTW plans is not thread-safe (executing them is), and compressors run as threads in tests.
class PlanCache {
 public:
  ~PlanCache() {
    std::lock_guard lock(mu_);
    for (auto& [len, p] : plans_) {
      fftwf_destroy_plan(p.forward);
      fftwf_destroy_plan(p.backward);
    }
  }
  Plans get(std::uint64_t len) {
    std::lock_guard lock(mu_);
    if (auto it = plans_.find(len); it != plans_.end()) return it->second;
    if (len > kMaxFftwLength) throw Error("real FFT (FFTW3): a chunk of " + std::to_string(len) + " exceeds 2^30");
    Aligned<float> real;
    Aligned<fftwf_complex> spec;
    real.resize(len);
    spec.resize(RealFft::bins(len));
    Plans p;
    p.forward = fftwf_plan_dft_r2c_1d(int(len), real.data(), spec.data(), FFTW_ESTIMATE);
    p.backward = fftwf_plan_dft_c2r_1d(int(len), spec.data(), real.data(), FFTW_ESTIMATE);
    if (!p.forward || !p.backward)
      throw Error("real FFT (FFTW3): no plan for a transform of length " + std::to_string(len));
    plans_.emplace(len, p);
    return p;
  }

 private:
  std::mutex mu_;
  std::map<std::uint64_t, Plans> plans_;
};

PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

// Chunk by chunk through aligned scratch (c2r overwrites its input, and the caller's buffers
// need not be aligned).
class FftwRealFft final : public RealFft {
 public:
  BackendKind kind() const override { return BackendKind::cpu; }

  void forward(std::span<const float> in, std::uint64_t len, std::span<float> spectrum) override {
    const std::uint64_t batch = detail::check_fft_sizes("forward", in.size(), len, spectrum.size());
    if (batch == 0) return;
    const Plans p = plan_cache().get(len);
    reserve(len);
    const std::uint64_t m = bins(len);
    for (std::uint64_t c = 0; c < batch; ++c) {
      std::memcpy(real_.data(), in.data() + c * len, len * sizeof(float));
      fftwf_execute_dft_r2c(p.forward, real_.data(), spec_.data());
      std::memcpy(spectrum.data() + 2 * c * m, spec_.data(), m * sizeof(fftwf_complex));
    }
  }

  void backward(std::span<const float> spectrum, std::uint64_t len, std::span<float> out) override {
    const std::uint64_t batch = detail::check_fft_sizes("backward", out.size(), len, spectrum.size());
    if (batch == 0) return;
    const Plans p = plan_cache().get(len);
    reserve(len);
    const std::uint64_t m = bins(len);
    for (std::uint64_t c = 0; c < batch; ++c) {
      std::memcpy(spec_.data(), spectrum.data() + 2 * c * m, m * sizeof(fftwf_complex));
      fftwf_execute_dft_c2r(p.backward, spec_.data(), real_.data());
      std::memcpy(out.data() + c * len, real_.data(), len * sizeof(float));
    }
  }

 private:
  void reserve(std::uint64_t len) {
    real_.resize(len);
    spec_.resize(bins(len));
  }
  Aligned<float> real_;
  Aligned<fftwf_complex> spec_;
};

#endif  // GS_HAVE_FFTW3

}  // namespace

bool real_fft_available(BackendKind kind) {
  if (kind == BackendKind::cuda) return cuda_available();
  return GS_HAVE_FFTW3 != 0;
}

std::unique_ptr<RealFft> make_real_fft(BackendKind kind) {
  if (kind == BackendKind::cuda) {
    resolve_backend("cuda");  // throws, saying why, when CUDA is not built or no GPU is present
#if defined(GS_HAVE_CUDA)
    return cuda::make_real_fft();
#endif
  }
#if GS_HAVE_FFTW3
  return std::make_unique<FftwRealFft>();
#else
  throw Error(
      "real FFT on the CPU: this build lacks FFTW3 (single precision, pkg-config fftw3f); "
      "install libfftw3-dev (scripts/setup.sh) and configure the build again, or use the "
      "cuda backend (cuFFT) on a GPU machine");
#endif
}

}  // namespace gs::kernels
