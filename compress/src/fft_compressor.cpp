// Frequency-domain sparsification with range-based floats (algorithms.md section 7). Each
// chunk of the vector goes through a real FFT; the largest coefficients by |X_k| (a fraction theta
// of each chunk's bins) are sent as Rice-coded bin gaps plus range-based floats; every worker
// all-gathers the byte encodings, sums the decoded spectra, and inverse FFTs give the mean. The
// transforms run on a kernels real-FFT engine (FFTW3 on the CPU, cuFFT with backend cuda). Wire
// format, schedule and measured error: docs/compressors.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "bit_stream.hpp"
#include "compressors.hpp"
#include "gs/compress/range_float.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/fft.hpp"

namespace gs::compress::detail {
namespace {

constexpr std::uint64_t kDefaultChunk = 4096;
constexpr std::uint64_t kMaxChunk = std::uint64_t(1) << 30;  // FFTW takes int lengths
constexpr int kWarmupSteps = 200;                            // theta reaches the density here
constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 32;

// Chunks of a vector of n: `full` chunks of `chunk` elements, then a shorter tail chunk if n is not
// a multiple. Chunk c owns bins(length(c)) spectrum bins, laid out one chunk after the other.
struct Layout {
  std::uint64_t n = 0, chunk = 0, full = 0, tail = 0;

  Layout(std::uint64_t n_, std::uint64_t chunk_) : n(n_), chunk(chunk_), full(n_ / chunk_), tail(n_ % chunk_) {}
  static std::uint64_t bins(std::uint64_t len) { return kernels::RealFft::bins(len); }
  std::uint64_t chunks() const { return full + (tail ? 1 : 0); }
  std::uint64_t length(std::uint64_t c) const { return c < full ? chunk : tail; }
  std::uint64_t offset(std::uint64_t c) const { return c * chunk; }
  std::uint64_t bin_offset(std::uint64_t c) const { return c * bins(chunk); }
  std::uint64_t total_bins() const { return full * bins(chunk) + (tail ? bins(tail) : 0); }
};

// DC, and Nyquist for even lengths, are real: their imaginary part is not sent.
bool has_imag(std::uint64_t bin, std::uint64_t len) { return bin != 0 && !(len % 2 == 0 && bin == len / 2); }

std::uint64_t kept_bins(std::uint64_t len, double theta) {
  const std::uint64_t m = Layout::bins(len);
  const auto k = std::uint64_t(std::floor(theta * double(m) + 1e-9));
  return std::clamp<std::uint64_t>(k, 1, m);
}

class FftCompressor final : public Compressor {
 public:
  FftCompressor(double density, const CompressorOptions& o)
      : Compressor(density),
        exponent_bits_(o.fft_exponent_bits),
        mantissa_bits_(o.fft_mantissa_bits),
        chunk_(o.fft_chunk) {
    try {
      check_range_float_bits(exponent_bits_, mantissa_bits_);
    } catch (const Error& e) {
      throw Error(std::string("compressor 'fft' (--fft-exponent-bits, --fft-mantissa-bits): ") + e.what());
    }
    if (chunk_ > kMaxChunk)
      throw Error("compressor 'fft': fft_chunk " + std::to_string(chunk_) + " exceeds 2^30; use 0 " +
                  "for the default (" + std::to_string(kDefaultChunk) + ")");
    try {
      fft_ = kernels::make_real_fft(kernels::resolve_backend(o.backend));
    } catch (const Error& e) {
      throw Error(std::string("compressor 'fft': ") + e.what());
    }
  }

  std::string_view name() const override { return "fft"; }
  Exchange exchange() const override { return Exchange::collective; }

  Compressed compress(std::span<const float>, std::string_view) override {
    throw Error(
        "compressor 'fft' runs its own exchange protocol (all-gather of encoded spectra): "
        "use ModelCompressor::step or Compressor::exchange with the workers' collectives");
  }

  // Diminishing kept fraction: geometric from min(1, 4 density) at step 0 to the density at
  // kWarmupSteps.
  double theta() const {
    const double r = density();
    const double start = std::min(1.0, 4.0 * r);
    if (step_ == 0) return start;
    if (step_ >= std::uint64_t(kWarmupSteps)) return r;
    return r * std::pow(start / r, 1.0 - double(step_) / double(kWarmupSteps));
  }

  void end_step() override { ++step_; }
  void save_state(StateWriter& w) const override {
    Compressor::save_state(w);
    w.put(step_);
  }
  void load_state(StateReader& r) override {
    Compressor::load_state(r);
    step_ = r.get<std::uint64_t>();
  }

  Exchanged exchange(std::span<const float> acc, std::string_view tensor, Collectives& comm, std::span<float> sent,
                     std::span<float> mean) override;

 private:
  int exponent_bits_, mantissa_bits_;
  std::uint64_t chunk_;
  std::uint64_t step_ = 0;
  std::unique_ptr<kernels::RealFft> fft_;
  std::uint16_t engine_code() const { return fft_->kind() == kernels::BackendKind::cuda ? 1 : 0; }
  std::vector<float> spectrum_;  // this worker's spectra, (re, im) interleaved, chunk after chunk

  // The whole vector through the engine: the full chunks in one batch, then the tail chunk.
  void transform(std::span<const float> x, const Layout& L, std::span<float> spectrum);
  void inverse(std::span<const float> spectrum, const Layout& L, std::span<float> x);

  Layout layout_for(std::uint64_t n, std::string_view tensor) const;
  std::vector<std::byte> encode(std::span<const float> acc, const Layout& L, double theta, std::uint64_t& selected);
  // Calls add(global bin, re, im) for every coefficient of one worker's encoding.
  template <class F>
  void decode(std::span<const std::byte> in, const Layout& L, int rank, F add) const;
};

Layout FftCompressor::layout_for(std::uint64_t n, std::string_view tensor) const {
  const std::string who = "compressor 'fft', tensor '" + std::string(tensor) + "': ";
  if (n == 0) throw Error(who + "the vector is empty; there is nothing to transform");
  // A vector shorter than the chunk (a bias, with per-layer granularity) is one chunk of its own.
  return Layout(n, std::min(n, chunk_ == 0 ? kDefaultChunk : chunk_));
}

void FftCompressor::transform(std::span<const float> x, const Layout& L, std::span<float> spectrum) {
  const auto split = std::size_t(L.full * L.chunk), at = std::size_t(2 * L.bin_offset(L.full));
  if (L.full) fft_->forward(x.first(split), L.chunk, spectrum.first(at));
  if (L.tail) fft_->forward(x.subspan(split), L.tail, spectrum.subspan(at));
}

void FftCompressor::inverse(std::span<const float> spectrum, const Layout& L, std::span<float> x) {
  const auto split = std::size_t(L.full * L.chunk), at = std::size_t(2 * L.bin_offset(L.full));
  if (L.full) fft_->backward(spectrum.first(at), L.chunk, x.first(split));
  if (L.tail) fft_->backward(spectrum.subspan(at), L.tail, x.subspan(split));
}

std::vector<std::byte> FftCompressor::encode(std::span<const float> acc, const Layout& L, double theta,
                                             std::uint64_t& selected) {
  spectrum_.resize(std::size_t(2 * L.total_bins()));
  transform(acc, L, spectrum_);
  std::vector<std::uint64_t> gaps;
  std::vector<float> values;
  std::vector<std::uint32_t> order;
  std::vector<float> power;
  for (std::uint64_t c = 0; c < L.chunks(); ++c) {
    const std::uint64_t len = L.length(c), m = Layout::bins(len);
    const float* X = spectrum_.data() + 2 * L.bin_offset(c);  // bin j: X[2j] + i X[2j + 1]
    power.resize(m);
    for (std::uint64_t j = 0; j < m; ++j) power[j] = X[2 * j] * X[2 * j] + X[2 * j + 1] * X[2 * j + 1];
    // The k largest |X_j| (ties to the lower bin), then in bin order for gap coding.
    const std::uint64_t k = kept_bins(len, theta);
    order.resize(m);
    std::iota(order.begin(), order.end(), 0u);
    if (k < m) {
      std::nth_element(
          order.begin(), order.begin() + std::ptrdiff_t(k - 1), order.end(),
          [&](std::uint32_t a, std::uint32_t b) { return power[a] > power[b] || (power[a] == power[b] && a < b); });
      order.resize(k);
      std::sort(order.begin(), order.end());
    }
    std::uint64_t prev = 0;
    for (std::uint64_t i = 0; i < k; ++i) {
      const std::uint32_t j = order[i];
      gaps.push_back(i == 0 ? j : j - prev - 1);
      prev = j;
      values.push_back(X[2 * j]);
      if (has_imag(j, len)) values.push_back(X[2 * j + 1]);
    }
  }
  selected = values.size();

  std::vector<std::byte> out;
  out.reserve(kHeaderBytes + gaps.size() + values.size() * 4);
  const int b = rice_parameter(gaps);
  put_field(out, kVersion);
  put_field(out, std::uint8_t(b));
  put_field(out, engine_code());  // the transform engine: every worker must use the same one
  put_field(out, std::uint64_t(L.n));
  put_field(out, std::uint32_t(L.chunk));
  put_field(out, std::uint32_t(L.full ? kept_bins(L.chunk, theta) : 0));
  put_field(out, std::uint32_t(L.tail ? kept_bins(L.tail, theta) : 0));
  put_field(out, std::uint64_t(0));  // index bytes, filled in below
  BitWriter w(out);
  for (std::uint64_t d : gaps) w.put_rice(d, b);
  w.finish();
  const std::uint64_t index_bytes = out.size() - kHeaderBytes;
  std::memcpy(out.data() + 24, &index_bytes, 8);
  encode_range_floats(values, exponent_bits_, mantissa_bits_, out);
  return out;
}

template <class F>
void FftCompressor::decode(std::span<const std::byte> in, const Layout& L, int rank, F add) const {
  const std::string who = "compressor 'fft': worker " + std::to_string(rank) + "'s encoding ";
  if (in.size() < kHeaderBytes || field_at<std::uint8_t>(in, 0) != kVersion)
    throw Error(who + "is not an fft spectrum of this version (truncated or corrupt bytes)");
  const int b = field_at<std::uint8_t>(in, 1);
  const auto engine_name = [](std::uint16_t code) { return code == 1 ? "cuFFT" : "FFTW3"; };
  if (const auto engine = field_at<std::uint16_t>(in, 2); engine != engine_code())
    throw Error(who + "was transformed by " + engine_name(engine) + " and this worker uses " +
                engine_name(engine_code()) +
                ": their roundings differ and the replicas would drift; give every worker the same "
                "--backend (cpu or cuda, not auto on a mix of machines)");
  if (field_at<std::uint64_t>(in, 4) != L.n || field_at<std::uint32_t>(in, 12) != L.chunk)
    throw Error(who + "is for n = " + std::to_string(field_at<std::uint64_t>(in, 4)) + ", chunk " +
                std::to_string(field_at<std::uint32_t>(in, 12)) + "; this worker has n = " + std::to_string(L.n) +
                ", chunk " + std::to_string(L.chunk) +
                ": every worker must pass the same tensors with the same options");
  // Kept counts come from the sender: a worker whose schedule differs still decodes.
  const std::uint64_t k_full = field_at<std::uint32_t>(in, 16), k_tail = field_at<std::uint32_t>(in, 20);
  const std::uint64_t index_bytes = field_at<std::uint64_t>(in, 24);
  if (b > 31 || (L.full && (k_full < 1 || k_full > Layout::bins(L.chunk))) ||
      (L.tail && (k_tail < 1 || k_tail > Layout::bins(L.tail))) || index_bytes > in.size() - kHeaderBytes)
    throw Error(who + "has a corrupt header");

  BitReader r(in.subspan(kHeaderBytes, std::size_t(index_bytes)), "compressor 'fft' indices");
  std::vector<std::uint64_t> bins;  // global bin of each kept coefficient
  std::uint64_t expect_values = 0;
  for (std::uint64_t c = 0; c < L.chunks(); ++c) {
    const std::uint64_t len = L.length(c), m = Layout::bins(len);
    const std::uint64_t k = c < L.full ? k_full : k_tail;
    std::uint64_t j = 0;
    for (std::uint64_t i = 0; i < k; ++i) {
      j = (i == 0 ? 0 : j + 1) + r.get_rice(b, m);
      if (j >= m) throw Error(who + "has a bin index out of range (corrupt bytes)");
      bins.push_back(L.bin_offset(c) + j);
      expect_values += has_imag(j, len) ? 2 : 1;
    }
  }
  std::vector<float> values;
  decode_range_floats(in.subspan(kHeaderBytes + std::size_t(index_bytes)), values);
  if (values.size() != expect_values)
    throw Error(who + "carries " + std::to_string(values.size()) + " values for " + std::to_string(expect_values) +
                " expected (corrupt bytes)");
  std::size_t v = 0;
  for (std::uint64_t c = 0, i = 0; c < L.chunks(); ++c) {
    const std::uint64_t len = L.length(c);
    const std::uint64_t k = c < L.full ? k_full : k_tail;
    for (std::uint64_t e = 0; e < k; ++e, ++i) {
      const std::uint64_t j = bins[i] - L.bin_offset(c);
      const float re = values[v++];
      const float im = has_imag(j, len) ? values[v++] : 0.0f;
      add(bins[i], re, im);
    }
  }
}

Compressor::Exchanged FftCompressor::exchange(std::span<const float> acc, std::string_view tensor, Collectives& comm,
                                              std::span<float> sent, std::span<float> mean) {
  const Layout L = layout_for(acc.size(), tensor);
  if (sent.size() != acc.size() || mean.size() != acc.size())
    throw Error("compressor 'fft', tensor '" + std::string(tensor) + "': sent and mean need " +
                std::to_string(acc.size()) + " elements, got " + std::to_string(sent.size()) + " and " +
                std::to_string(mean.size()));
  const std::uint64_t bad = count_nonfinite(acc);
  if (bad)
    throw Error("compressor 'fft', tensor '" + std::string(tensor) + "': " + std::to_string(bad) +
                " non-finite values (NaN/Inf); a transform would spread them over their whole "
                "chunk: fix the gradient (lower the learning rate, clip) or skip the step");

  const double keep = theta();
  Exchanged r;
  r.info.n = acc.size();
  r.info.target_density = keep;
  const std::vector<std::byte> mine = encode(acc, L, keep, r.info.selected);
  r.wire_bytes = mine.size();
  const auto all = comm.allgather(mine);

  // Sum of every worker's spectrum, in rank order (the same floats on every worker), and this
  // worker's own as the others decode it.
  const std::size_t total = std::size_t(L.total_bins());
  std::vector<float> sum(2 * total, 0.0f), own(2 * total, 0.0f);
  for (std::size_t w = 0; w < all.size(); ++w) {
    const bool me = int(w) == comm.rank();
    decode(all[w], L, int(w), [&](std::uint64_t bin, float re, float im) {
      sum[2 * bin] += re;
      sum[2 * bin + 1] += im;
      if (me) own[2 * bin] = re, own[2 * bin + 1] = im;
    });
  }

  // Inverse transforms: the summed spectra give the mean, this worker's own what it sent.
  inverse(sum, L, mean);
  inverse(own, L, sent);
  const double workers = double(all.size());
  for (std::uint64_t c = 0; c < L.chunks(); ++c) {
    const std::uint64_t len = L.length(c);
    const auto to_mean = float(1.0 / (double(len) * workers)), to_sent = float(1.0 / double(len));
    float* m = mean.data() + L.offset(c);
    float* t = sent.data() + L.offset(c);
    for (std::uint64_t i = 0; i < len; ++i) m[i] *= to_mean, t[i] *= to_sent;
  }
  return r;
}

}  // namespace

std::unique_ptr<Compressor> make_fft(double density, const CompressorOptions& o) {
  return std::make_unique<FftCompressor>(density, o);
}

}  // namespace gs::compress::detail
