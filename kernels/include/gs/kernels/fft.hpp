#pragma once
// Batched single-precision real FFTs of equal-length chunks, on the CPU (FFTW3, optional at build
// time) or on CUDA (cuFFT). Buffers are host memory on both backends: the CUDA engine copies each
// batch in, transforms it on the device and copies the result out, so a caller with host vectors
// (the `fft` compressor) switches backend without changing its code.
//
// Layout: `in` holds batch = in.size() / len chunks of len floats, one after the other; a spectrum
// holds batch x bins(len) complex values as interleaved (re, im) floats, chunk after chunk.
// forward is r2c; backward is c2r and unnormalized: backward(forward(x)) = len * x.
#include <cstdint>
#include <memory>
#include <span>

#include "gs/kernels/backend.hpp"

namespace gs::kernels {

class RealFft {
 public:
  virtual ~RealFft() = default;
  static constexpr std::uint64_t bins(std::uint64_t len) { return len / 2 + 1; }
  virtual BackendKind kind() const = 0;
  // gs::Error for len == 0, in.size() not a multiple of len, or spectrum.size() !=
  // 2 * batch * bins(len).
  virtual void forward(std::span<const float> in, std::uint64_t len, std::span<float> spectrum) = 0;
  // gs::Error for len == 0, out.size() not a multiple of len, or spectrum.size() !=
  // 2 * batch * bins(len) with batch = out.size() / len.
  virtual void backward(std::span<const float> spectrum, std::uint64_t len, std::span<float> out) = 0;
};

// True when make_real_fft(kind) would succeed: cpu needs a build with FFTW3, cuda needs
// cuda_available().
bool real_fft_available(BackendKind kind);
// The engine for `kind`; gs::Error saying what is missing when it is not available. Engines are
// not shared between threads (each holds its own scratch). FFTW3 plans are cached per length for
// the whole process; a cuFFT engine keeps one plan per (length, batch, direction), at most 16 (a
// model's tensors have a few distinct sizes; beyond 16 the least recently used goes).
std::unique_ptr<RealFft> make_real_fft(BackendKind kind);

namespace detail {
// The size checks both engines share; returns the batch count. `what` names the call.
std::uint64_t check_fft_sizes(const char* what, std::uint64_t real_size, std::uint64_t len,
                              std::uint64_t spectrum_size);
}  // namespace detail

}  // namespace gs::kernels
