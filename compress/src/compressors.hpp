#pragma once
// Internal: the concrete compressors' factories (registry.cpp makes them by name) and the shared
// selection helpers.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gs/compress/compressor.hpp"

namespace gs::compress::detail {

std::unique_ptr<Compressor> make_none();
std::unique_ptr<Compressor> make_topk(double ratio, const CompressorOptions& o);
std::unique_ptr<Compressor> make_randomk(double ratio, const CompressorOptions& o);
std::unique_ptr<Compressor> make_variance(double ratio, const CompressorOptions& o);
// fft (fft_compressor.cpp): gs::Error when the build lacks FFTW3 or for bad fft_* options.
std::unique_ptr<Compressor> make_fft(double ratio, const CompressorOptions& o);
std::unique_ptr<Compressor> make_threshold_compressor(std::string_view name, double ratio,
                                                      const CompressorOptions& o);
// qsgd-mn, qsgd-mn-ts, qsgd-mn-ms (quantizers.cpp): gs::Error for bad options.quant_bits.
std::unique_ptr<Compressor> make_quantizer(std::string_view name, const CompressorOptions& o);

// How the quantizers' all-reduce SUM carries codes in [-max_code, max_code] from `workers` workers
// (quantizers.cpp): the format with the fewest bits per element whose sum cannot overflow.
struct SumFormat {
  enum class Kind { int8, int32, packed } kind = Kind::int32;
  int lane_bits = 0;  // packed: bits per lane, bit_width(2 * workers * max_code)
  int lanes = 0;      // packed: lanes per int64 word, floor(63 / lane_bits)
  static SumFormat choose(int workers, std::int64_t max_code);
  std::uint64_t bytes(std::size_t n) const;  // on the wire for n codes
};

// Sparse payload of acc's finite elements with |acc| > threshold, ascending indices.
Payload select_above(std::span<const float> acc, double threshold);
// Sparse payload of exactly min(k, finite count) largest |acc| (ties broken by lower index).
Payload select_topk(std::span<const float> acc, std::uint64_t k);
std::uint64_t count_nonfinite(std::span<const float> acc);

}  // namespace gs::compress::detail
