#pragma once
// Range-based floats: a block of values shares one exponent range chosen from its own magnitudes,
// so a few exponent bits cover it and the rest of the budget goes to the mantissa (the encoding of
// the kept spectrum coefficients of the `fft` compressor; algorithms.md section 7). Layout and
// error bound: docs/compressors.md.
//
// Each value is 1 sign bit, E exponent bits and M mantissa bits. Exponent code 0 means zero; codes
// c = 1 .. 2^E - 1 stand for the binades 2^(emax - 2^E + 1 + c), so the top code is the binade of
// the largest magnitude (emax). A nonzero value decodes to sign * 2^e * (1 + q / 2^M), its mantissa
// rounded to nearest: relative error <= 2^-(M+1), and below 2^-M for the few values within half a
// step of 2^(emax+1), which stay in the top binade instead of rounding up out of the range.
// Magnitudes below 2^(emax - 2^E + 2) flush to zero.
//
// The caller gives a budget (exponent_bits 1..8, mantissa_bits 1..23); the block uses
// E = the fewest exponent bits that cover its nonzero magnitudes' binades (min to max), at most
// exponent_bits, and M = exponent_bits + mantissa_bits - E (at most 23): the same bits per value,
// never fewer mantissa bits than asked for.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gs::compress {

struct RangeFloatFormat {
  int exponent_bits = 1;  // E used by the block, 1..8
  int mantissa_bits = 1;  // M used by the block, 1..23
  int max_exponent = 0;   // emax: binade of the largest magnitude (floor(log2 max|v|))

  int bits_per_value() const { return 1 + exponent_bits + mantissa_bits; }
  // Lowest binade kept: magnitudes below 2^min_exponent() flush to zero.
  int min_exponent() const { return max_exponent - (1 << exponent_bits) + 2; }
};

// Bytes of the block header (exponent bits, mantissa bits, emax, count).
inline constexpr std::size_t kRangeFloatHeaderBytes = 12;

// gs::Error unless exponent_bits is 1..8 and mantissa_bits 1..23.
void check_range_float_bits(int exponent_bits, int mantissa_bits);

// The format encode_range_floats uses for these values under this budget. gs::Error on NaN/Inf.
RangeFloatFormat choose_range_float_format(std::span<const float> values, int exponent_bits, int mantissa_bits);

// What v becomes after encoding in format f and decoding.
float quantize_range_float(float v, const RangeFloatFormat& f);

// Appends the block (header, then the codes packed LSB-first, padded to a byte) to out and
// returns its format. gs::Error on NaN/Inf or bits out of range.
RangeFloatFormat encode_range_floats(std::span<const float> values, int exponent_bits, int mantissa_bits,
                                     std::vector<std::byte>& out);

// Decodes the block at the start of `in` into out (resized to its count); returns the bytes it
// took. gs::Error on a truncated or corrupt block.
std::size_t decode_range_floats(std::span<const std::byte> in, std::vector<float>& out);

// Size of a block of `count` values in format f, header included.
std::uint64_t range_float_bytes(std::uint64_t count, const RangeFloatFormat& f);

}  // namespace gs::compress
