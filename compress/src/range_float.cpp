#include "gs/compress/range_float.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "bit_stream.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {

static_assert(std::endian::native == std::endian::little, "the wire format assumes little-endian");

void check_range_float_bits(int exponent_bits, int mantissa_bits) {
  if (exponent_bits < 1 || exponent_bits > 8)
    throw Error("range float: exponent bits must be 1..8 (FP32 has 8), got " + std::to_string(exponent_bits));
  if (mantissa_bits < 1 || mantissa_bits > 23)
    throw Error("range float: mantissa bits must be 1..23 (FP32 has 23), got " + std::to_string(mantissa_bits));
}

RangeFloatFormat choose_range_float_format(std::span<const float> values, int exponent_bits, int mantissa_bits) {
  check_range_float_bits(exponent_bits, mantissa_bits);
  float vmax = 0.0f;
  float vmin = std::numeric_limits<float>::infinity();
  for (float v : values) {
    if (!std::isfinite(v)) throw Error("range float: cannot encode a non-finite value (NaN or Inf); remove it first");
    const float a = std::fabs(v);
    if (a > 0.0f) {
      vmax = std::max(vmax, a);
      vmin = std::min(vmin, a);
    }
  }
  const int budget = exponent_bits + mantissa_bits;
  // Spare exponent bits go to the mantissa, but FP32 cannot hold more than 23 mantissa bits.
  const int fewest = std::max(1, budget - 23);
  RangeFloatFormat f;
  int e = fewest;
  if (vmax > 0.0f) {
    f.max_exponent = std::ilogb(vmax);
    const int binades = f.max_exponent - std::ilogb(vmin) + 1;
    while (e < exponent_bits && (1 << e) - 1 < binades) ++e;
  }
  f.exponent_bits = e;
  f.mantissa_bits = budget - e;
  return f;
}

namespace {

std::uint32_t to_code(float v, const RangeFloatFormat& f) {
  const int m = f.mantissa_bits;
  const double a = std::fabs(double(v));
  if (!(a > 0.0)) return 0;  // zero (and -0) is exponent code 0
  int e = std::ilogb(a);
  if (e < f.min_exponent()) return 0;           // below the range: flushed to zero
  const double frac = std::ldexp(a, -e) - 1.0;  // exact: a has 24 significant bits at most
  auto q = std::uint32_t(std::nearbyint(std::ldexp(frac, m)));
  if (q >> m) {  // rounded up to the next binade
    if (e < f.max_exponent) {
      ++e;
      q = 0;
    } else {
      q = (1u << m) - 1;
    }
  }
  if (e > f.max_exponent) {  // above the range (only quantize_range_float meets it): saturate
    e = f.max_exponent;
    q = (1u << m) - 1;
  }
  const auto c = std::uint32_t(e - f.max_exponent + (1 << f.exponent_bits) - 1);
  const std::uint32_t sign = std::signbit(v) ? 1u : 0u;
  return (sign << (f.exponent_bits + m)) | (c << m) | q;
}

float from_code(std::uint32_t code, const RangeFloatFormat& f) {
  const int m = f.mantissa_bits;
  const std::uint32_t q = code & ((1u << m) - 1);
  const std::uint32_t c = (code >> m) & ((1u << f.exponent_bits) - 1);
  if (c == 0) return 0.0f;
  const int e = f.max_exponent - (1 << f.exponent_bits) + 1 + int(c);
  const auto a = float(std::ldexp(1.0 + std::ldexp(double(q), -m), e));
  return (code >> (f.exponent_bits + m)) & 1u ? -a : a;
}

}  // namespace

float quantize_range_float(float v, const RangeFloatFormat& f) {
  if (!std::isfinite(v)) throw Error("range float: cannot quantize a non-finite value");
  return from_code(to_code(v, f), f);
}

std::uint64_t range_float_bytes(std::uint64_t count, const RangeFloatFormat& f) {
  return kRangeFloatHeaderBytes + (count * std::uint64_t(f.bits_per_value()) + 7) / 8;
}

RangeFloatFormat encode_range_floats(std::span<const float> values, int exponent_bits, int mantissa_bits,
                                     std::vector<std::byte>& out) {
  const RangeFloatFormat f = choose_range_float_format(values, exponent_bits, mantissa_bits);
  out.reserve(out.size() + range_float_bytes(values.size(), f));
  detail::put_field(out, std::uint8_t(f.exponent_bits));
  detail::put_field(out, std::uint8_t(f.mantissa_bits));
  detail::put_field(out, std::int16_t(f.max_exponent));
  detail::put_field(out, std::uint64_t(values.size()));
  detail::BitWriter w(out);
  const int bits = f.bits_per_value();
  for (float v : values) w.put(to_code(v, f), bits);
  w.finish();
  return f;
}

std::size_t decode_range_floats(std::span<const std::byte> in, std::vector<float>& out) {
  if (in.size() < kRangeFloatHeaderBytes)
    throw Error("range float: a block needs a " + std::to_string(kRangeFloatHeaderBytes) + "-byte header, got " +
                std::to_string(in.size()) + " bytes");
  RangeFloatFormat f;
  f.exponent_bits = int(std::uint8_t(in[0]));
  f.mantissa_bits = int(std::uint8_t(in[1]));
  const auto emax = detail::field_at<std::int16_t>(in, 2);
  const auto count = detail::field_at<std::uint64_t>(in, 4);
  f.max_exponent = emax;
  if (f.exponent_bits < 1 || f.exponent_bits > 8 || f.mantissa_bits < 1 || f.mantissa_bits > 23 || emax < -149 ||
      emax > 127)
    throw Error("range float: corrupt block header (exponent bits " + std::to_string(f.exponent_bits) +
                ", mantissa bits " + std::to_string(f.mantissa_bits) + ", emax " + std::to_string(emax) + ")");
  const std::uint64_t payload = in.size() - kRangeFloatHeaderBytes;
  if (count > payload * 8 / std::uint64_t(f.bits_per_value()))
    throw Error("range float: the block claims " + std::to_string(count) + " values but holds " +
                std::to_string(payload) + " bytes (truncated or corrupt)");
  const std::size_t total = std::size_t(range_float_bytes(count, f));
  detail::BitReader r(in.subspan(kRangeFloatHeaderBytes, total - kRangeFloatHeaderBytes), "range float");
  out.resize(std::size_t(count));
  const int bits = f.bits_per_value();
  for (float& v : out) v = from_code(r.get(bits), f);
  return total;
}

}  // namespace gs::compress
