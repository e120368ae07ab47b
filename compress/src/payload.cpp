#include "gs/compress/payload.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>

#include "bit_stream.hpp"
#include "gs/error.hpp"

namespace gs::compress {

std::uint64_t Payload::wire_bytes() const {
  if (kind == PayloadKind::sparse) return std::uint64_t(values.size()) * 8u;
  return (n * code_bits + 7) / 8;
}

void validate(const Payload& p, bool check_unique) {
  if (p.kind == PayloadKind::sparse) {
    if (p.indices.size() != p.values.size())
      throw Error("payload: " + std::to_string(p.indices.size()) + " indices but " +
                  std::to_string(p.values.size()) + " values");
    if (p.n > std::uint64_t(INT32_MAX) + 1)
      throw Error("payload: sparse vectors are limited to 2^31 elements (int32 indices); use "
                  "buckets or layers for larger models");
    for (std::int32_t i : p.indices)
      if (i < 0 || std::uint64_t(i) >= p.n)
        throw Error("payload: index " + std::to_string(i) + " outside [0, " + std::to_string(p.n) +
                    ")");
    if (check_unique) {
      std::unordered_set<std::int32_t> seen(p.indices.begin(), p.indices.end());
      if (seen.size() != p.indices.size()) throw Error("payload: repeated indices");
    }
  } else if (p.kind == PayloadKind::dense) {
    if (!p.indices.empty()) throw Error("payload: a dense payload carries no indices");
    if (p.values.size() != p.n)
      throw Error("payload: dense payload has " + std::to_string(p.values.size()) +
                  " codes for n = " + std::to_string(p.n));
    if (p.code_bits < 1 || p.code_bits > 32) throw Error("payload: code_bits must be 1..32");
  } else {
    throw Error("payload: unknown kind");
  }
}

namespace {
constexpr char kMagic[4] = {'G', 'S', 'P', '1'};
constexpr std::size_t kHeader = 4 + 1 + 8 + 8 + 8 + 4;

// The next header field, moving `at` past it.
template <class T>
T take(std::span<const std::byte> in, std::size_t& at) {
  const T v = detail::field_at<T>(in, at);
  at += sizeof(T);
  return v;
}
}  // namespace

// The format is little-endian; every host we build for is, so values are copied as they are.
static_assert(std::endian::native == std::endian::little, "the wire format assumes little-endian");

std::vector<std::byte> encode(const Payload& p) {
  validate(p);
  std::vector<std::byte> out;
  out.reserve(kHeader + p.indices.size() * 4 + p.values.size() * 4);
  for (char c : kMagic) detail::put_field(out, c);
  detail::put_field(out, std::uint8_t(p.kind));
  detail::put_field(out, p.n);
  detail::put_field(out, std::uint64_t(p.values.size()));
  detail::put_field(out, p.scale);
  detail::put_field(out, p.code_bits);
  const auto* ib = reinterpret_cast<const std::byte*>(p.indices.data());
  out.insert(out.end(), ib, ib + p.indices.size() * 4);
  const auto* vb = reinterpret_cast<const std::byte*>(p.values.data());
  out.insert(out.end(), vb, vb + p.values.size() * 4);
  return out;
}

Payload decode(std::span<const std::byte> in) {
  if (in.size() < kHeader || std::memcmp(in.data(), kMagic, 4) != 0)
    throw Error("payload: not a gradscope payload (bad magic or shorter than its header)");
  std::size_t at = 4;
  Payload p;
  const auto kind = take<std::uint8_t>(in, at);
  if (kind != 1 && kind != 2) throw Error("payload: unknown kind " + std::to_string(kind));
  p.kind = PayloadKind(kind);
  p.n = take<std::uint64_t>(in, at);
  const auto count = take<std::uint64_t>(in, at);
  p.scale = take<double>(in, at);
  p.code_bits = take<std::uint32_t>(in, at);
  const std::uint64_t per = p.kind == PayloadKind::sparse ? 8 : 4;
  if (count > (in.size() - kHeader) / per || in.size() - kHeader != count * per)
    throw Error("payload: truncated or oversized buffer (" + std::to_string(in.size()) +
                " bytes for " + std::to_string(count) + " entries)");
  if (p.kind == PayloadKind::sparse) {
    p.indices.resize(count);
    if (count > 0) std::memcpy(p.indices.data(), in.data() + at, count * 4);
    at += count * 4;
  }
  p.values.resize(count);
  if (count > 0) std::memcpy(p.values.data(), in.data() + at, count * 4);
  validate(p);
  return p;
}

}  // namespace gs::compress
