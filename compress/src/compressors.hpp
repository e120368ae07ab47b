#pragma once
// Internal: the concrete compressors' factories (registry.cpp lists them by name) and the shared
// selection helpers.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/fitting/threshold_methods.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/select.hpp"

namespace gs::compress::detail {

// A selection compressor's kernels::Selector, made at its first use: making a compressor touches
// no device (backend auto asks the CUDA runtime about the current device, which would hold a
// context there), and the first selection runs where its vector is, the DDP hook's thread already
// on the bucket's device. The name is checked at once.
class SelectorOnUse {
 public:
  explicit SelectorOnUse(std::string backend) : backend_(std::move(backend)) { kernels::check_backend_name(backend_); }
  kernels::Selector* operator->() { return &get(); }
  kernels::Selector& get() {
    if (!s_) s_ = kernels::make_selector(kernels::resolve_backend(backend_));
    return *s_;
  }

 private:
  std::string backend_;
  std::unique_ptr<kernels::Selector> s_;
};

std::unique_ptr<Compressor> make_none();
std::unique_ptr<Compressor> make_topk(double density, const CompressorOptions& o);
std::unique_ptr<Compressor> make_randomk(double density, std::uint64_t seed);
std::unique_ptr<Compressor> make_variance(double density, const CompressorOptions& o);
// fft (fft_compressor.cpp): gs::Error when the build lacks FFTW3 or for bad fft_* options.
std::unique_ptr<Compressor> make_fft(double density, const CompressorOptions& o);

// The compressor of a threshold method (threshold_compressors.cpp): it sends what its rule
// selects; an exact method's is the top-k compressor.
std::unique_ptr<Compressor> make_threshold_compressor(const fitting::ThresholdMethodInfo& method, double density,
                                                      const CompressorOptions& o);
// The unbiased quantizers (quantizers.cpp) with one scale (qsgd-mn), two (qsgd-mn-ts) or several
// (qsgd-mn-ms): gs::Error for bad options.quant_bits.
enum class Scales { one, two, several };
std::unique_ptr<Compressor> make_quantizer(Scales scales, const CompressorOptions& o);

// Unsigned values of `bits` bits packed floor(63 / bits) to an int64 word, the top bit left clear:
// when every lane's sum over the workers stays below 2^bits, an all-reduce SUM of the words adds
// every lane at once, without a carry into the next lane and without signed overflow.
struct Lanes {
  int bits = 1;
  int per_word = 63;
  static Lanes of(int bits) { return {bits, 63 / bits}; }
  std::size_t words(std::size_t count) const { return (count + per_word - 1) / per_word; }
  // Appends values (each < 2^bits) lane after lane, word after word.
  class Writer {
   public:
    Writer(const Lanes& lanes, std::vector<std::int64_t>& out)
        : bits_(lanes.bits), per_word_(lanes.per_word), out_(out) {
      out_.clear();
    }
    void push(std::uint64_t value) {
      word_ |= value << (lane_ * bits_);
      if (++lane_ == per_word_) flush();
    }
    void finish() {
      if (lane_) flush();
    }

   private:
    void flush() {
      out_.push_back(std::int64_t(word_));
      word_ = 0;
      lane_ = 0;
    }
    int bits_, per_word_;
    std::vector<std::int64_t>& out_;
    std::uint64_t word_ = 0;
    int lane_ = 0;
  };
  // Reads the lanes back in the order they were pushed.
  class Reader {
   public:
    Reader(const Lanes& lanes, std::span<const std::int64_t> in)
        : bits_(lanes.bits), per_word_(lanes.per_word), in_(in), mask_((std::uint64_t(1) << lanes.bits) - 1) {}
    std::uint64_t next() {
      if (lane_ == per_word_) ++word_, lane_ = 0;
      return (std::uint64_t(in_[word_]) >> (lane_++ * bits_)) & mask_;
    }

   private:
    int bits_, per_word_;
    std::span<const std::int64_t> in_;
    std::uint64_t mask_;
    std::size_t word_ = 0;
    int lane_ = 0;
  };
};

// How the quantizers' all-reduce SUM carries n codes in [-max_code, max_code] from `workers`
// workers (quantizers.cpp): the format with the fewest bytes whose sum cannot overflow (ties to the
// plain types; a few codes stay int8 or int32 rather than fill a word).
struct SumFormat {
  enum class Kind { int8, int32, packed } kind = Kind::int32;
  Lanes lanes;  // packed: offset codes in [0, 2 max_code], bit_width(2 * workers * max_code) bits
  static SumFormat choose(int workers, std::int64_t max_code, std::size_t n);
  std::uint64_t bytes(std::size_t n) const;  // on the wire for n codes
};

// How the multi-scale quantizers agree on the level in [0, levels) of each of n elements: an
// all-reduce MIN of int8 indices, or, where it takes fewer bytes, an all-reduce SUM of thermometer
// bits [level >= j] for j = 1..levels-1 in lanes of bit_width(workers) bits (the MIN is the number
// of j every worker reached: the j whose sum is `workers`).
struct LevelFormat {
  bool thermometer = false;
  Lanes lanes;
  static LevelFormat choose(int workers, std::size_t levels, std::size_t n);
  std::uint64_t bytes(std::size_t n, std::size_t levels) const;
};

std::uint64_t count_nonfinite(std::span<const float> acc);

}  // namespace gs::compress::detail
