#include "gs/compress/payload.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>

#include "bit_stream.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {

void validate(const Payload& p, bool check_unique) {
  if (p.kind == PayloadKind::sparse) {
    if (p.indices.size() != p.values.size())
      throw Error("payload: " + std::to_string(p.indices.size()) + " indices but " + std::to_string(p.values.size()) +
                  " values");
    if (p.n > std::uint64_t(INT32_MAX) + 1)
      throw Error(
          "payload: sparse vectors are limited to 2^31 elements (int32 indices); use "
          "buckets or layers for larger models");
    for (std::int32_t i : p.indices)
      if (i < 0 || std::uint64_t(i) >= p.n)
        throw Error("payload: index " + std::to_string(i) + " outside [0, " + std::to_string(p.n) + ")");
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
constexpr char kMagic[4] = {'G', 'S', 'P', '2'};
constexpr std::size_t kHeader = 4 + 1 + 8 + 8 + 8 + 4;
// Sparse payloads add their index coding: the kind, the Rice parameter and the index bytes.
constexpr std::size_t kIndexHeader = 1 + 1 + 8;
enum class IndexCoding : std::uint8_t { plain = 0, rice_gaps = 1 };

// The next header field, moving `at` past it.
template <class T>
T take(std::span<const std::byte> in, std::size_t& at) {
  const T v = detail::field_at<T>(in, at);
  at += sizeof(T);
  return v;
}

// How a sparse payload's indices go on the wire: Rice-coded gaps when they ascend and that is
// shorter than int32s, else int32s as they are.
struct IndexPlan {
  IndexCoding coding = IndexCoding::plain;
  int rice = 0;
  std::vector<std::uint64_t> gaps;  // first index, then (index - previous index - 1)
  std::uint64_t bytes = 0;
};

IndexPlan plan_indices(std::span<const std::int32_t> indices) {
  IndexPlan plan;
  plan.bytes = std::uint64_t(indices.size()) * 4u;
  plan.gaps.reserve(indices.size());
  for (std::size_t j = 0; j < indices.size(); ++j) {
    if (j > 0 && indices[j] <= indices[j - 1]) {
      plan.gaps.clear();
      return plan;
    }
    plan.gaps.push_back(j == 0 ? std::uint64_t(indices[0]) : std::uint64_t(indices[j] - indices[j - 1] - 1));
  }
  std::uint64_t bits = 0;
  const int rice = detail::rice_parameter(plan.gaps, &bits);
  if ((bits + 7) / 8 < plan.bytes) {
    plan.coding = IndexCoding::rice_gaps;
    plan.rice = rice;
    plan.bytes = (bits + 7) / 8;
  }
  return plan;
}
}  // namespace

namespace {
std::uint64_t wire_bytes_of(const Payload& p, const IndexPlan& plan) {
  if (p.kind == PayloadKind::sparse) return plan.bytes + std::uint64_t(p.values.size()) * 4u;
  return (p.n * p.code_bits + 7) / 8;
}
}  // namespace

std::uint64_t Payload::wire_bytes() const {
  return wire_bytes_of(*this, kind == PayloadKind::sparse ? plan_indices(indices) : IndexPlan{});
}

// The format is little-endian; every host we build for is, so values are copied as they are.
static_assert(std::endian::native == std::endian::little, "the wire format assumes little-endian");

std::vector<std::byte> encode(const Payload& p) {
  std::uint64_t wire_bytes = 0;
  return encode(p, wire_bytes);
}

std::vector<std::byte> encode(const Payload& p, std::uint64_t& wire_bytes) {
  validate(p);
  const bool sparse = p.kind == PayloadKind::sparse;
  const IndexPlan plan = sparse ? plan_indices(p.indices) : IndexPlan{};
  wire_bytes = wire_bytes_of(p, plan);
  std::vector<std::byte> out;
  out.reserve(kHeader + (sparse ? kIndexHeader + plan.bytes : 0) + p.values.size() * 4);
  for (char c : kMagic) detail::put_field(out, c);
  detail::put_field(out, std::uint8_t(p.kind));
  detail::put_field(out, p.n);
  detail::put_field(out, std::uint64_t(p.values.size()));
  detail::put_field(out, p.scale);
  detail::put_field(out, p.code_bits);
  if (sparse) {
    detail::put_field(out, std::uint8_t(plan.coding));
    detail::put_field(out, std::uint8_t(plan.rice));
    detail::put_field(out, plan.bytes);
    if (plan.coding == IndexCoding::rice_gaps) {
      detail::BitWriter w(out);
      for (std::uint64_t d : plan.gaps) w.put_rice(d, plan.rice);
      w.finish();
    } else {
      const auto* ib = reinterpret_cast<const std::byte*>(p.indices.data());
      out.insert(out.end(), ib, ib + p.indices.size() * 4);
    }
  }
  const auto* vb = reinterpret_cast<const std::byte*>(p.values.data());
  out.insert(out.end(), vb, vb + p.values.size() * 4);
  return out;
}

namespace {
// The sparse payload's indices from the index section `in` (count of them, coded as said).
void decode_indices(std::span<const std::byte> in, IndexCoding coding, int rice, Payload& p, std::uint64_t count) {
  p.indices.resize(count);
  if (coding == IndexCoding::plain) {
    if (in.size() != count * 4)
      throw Error("payload: " + std::to_string(in.size()) + " index bytes for " + std::to_string(count) +
                  " int32 indices (truncated or corrupt bytes)");
    if (count > 0) std::memcpy(p.indices.data(), in.data(), count * 4);
    return;
  }
  detail::BitReader r(in, "payload indices");
  std::uint64_t at = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    // Every index lies below n: no gap can exceed n, which bounds what corrupt bytes can spin.
    const std::uint64_t gap = r.get_rice(rice, (p.n >> rice) + 1);
    at = j == 0 ? gap : at + 1 + gap;
    if (at >= p.n)
      throw Error("payload: index " + std::to_string(at) + " outside [0, " + std::to_string(p.n) + ") (corrupt bytes)");
    p.indices[j] = std::int32_t(at);
  }
  if (r.bytes_used() != in.size())
    throw Error("payload: the index section has " + std::to_string(in.size() - r.bytes_used()) +
                " bytes past its codes (corrupt bytes)");
}
}  // namespace

Payload decode(std::span<const std::byte> in) {
  if (in.size() < kHeader || std::memcmp(in.data(), kMagic, 4) != 0)
    throw Error("payload: not a gradscope payload of this version (bad magic or shorter than its header)");
  std::size_t at = 4;
  Payload p;
  const auto kind = take<std::uint8_t>(in, at);
  if (kind != 1 && kind != 2) throw Error("payload: unknown kind " + std::to_string(kind));
  p.kind = PayloadKind(kind);
  p.n = take<std::uint64_t>(in, at);
  const auto count = take<std::uint64_t>(in, at);
  p.scale = take<double>(in, at);
  p.code_bits = take<std::uint32_t>(in, at);
  std::uint64_t index_bytes = 0;
  auto coding = IndexCoding::plain;
  int rice = 0;
  if (p.kind == PayloadKind::sparse) {
    if (in.size() < kHeader + kIndexHeader) throw Error("payload: truncated sparse header");
    const auto c = take<std::uint8_t>(in, at);
    rice = take<std::uint8_t>(in, at);
    index_bytes = take<std::uint64_t>(in, at);
    if (c > 1 || rice > 31) throw Error("payload: unknown index coding (corrupt bytes)");
    coding = IndexCoding(c);
    if (p.n > std::uint64_t(INT32_MAX) + 1) throw Error("payload: n beyond int32 indices (corrupt bytes)");
  }
  const std::uint64_t rest = in.size() - at;
  if (index_bytes > rest || count > (rest - index_bytes) / 4 || rest - index_bytes != count * 4)
    throw Error("payload: truncated or oversized buffer (" + std::to_string(in.size()) + " bytes for " +
                std::to_string(count) + " entries)");
  if (p.kind == PayloadKind::sparse) {
    decode_indices(in.subspan(at, std::size_t(index_bytes)), coding, rice, p, count);
    at += std::size_t(index_bytes);
  }
  p.values.resize(count);
  if (count > 0) std::memcpy(p.values.data(), in.data() + at, count * 4);
  validate(p);
  return p;
}

}  // namespace gs::compress
