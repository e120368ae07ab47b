#pragma once
// Internal: the wire formats' byte-level helpers: fixed-size header fields (little-endian, the
// host order the formats assume) and LSB-first bit packing for the compact formats (range-based
// floats, Rice-coded indices). Bits fill each byte from its least significant bit; a stream ends
// on a byte boundary.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "gs/base/error.hpp"

namespace gs::compress::detail {

// Appends the bytes of v.
template <class T>
void put_field(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
// The T stored at byte `at` of in (the caller has checked that it fits).
template <class T>
T field_at(std::span<const std::byte> in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

class BitWriter {
 public:
  explicit BitWriter(std::vector<std::byte>& out) : out_(out) {}
  // The low `bits` bits of v (bits <= 32).
  void put(std::uint32_t v, int bits) {
    if (bits == 0) return;
    acc_ |= std::uint64_t(v & mask(bits)) << fill_;
    fill_ += bits;
    while (fill_ >= 8) {
      out_.push_back(std::byte(acc_ & 0xffu));
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  // Rice code of d with parameter b: d >> b in unary (ones, then a zero), then the low b bits.
  void put_rice(std::uint64_t d, int b) {
    for (std::uint64_t q = d >> b; q > 0;) {
      const int ones = q >= 32 ? 32 : int(q);
      put(std::uint32_t(mask(ones)), ones);
      q -= std::uint64_t(ones);
    }
    put(0, 1);
    put(std::uint32_t(d & mask(b)), b);
  }
  // Pads the last byte with zeros.
  void finish() {
    if (fill_ > 0) out_.push_back(std::byte(acc_ & 0xffu));
    acc_ = 0;
    fill_ = 0;
  }

  static std::uint64_t mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

 private:
  std::vector<std::byte>& out_;
  std::uint64_t acc_ = 0;
  int fill_ = 0;
};

// Rice parameter with the fewest bits for these gaps (searched near log2 of their mean); the bits
// of their Rice codes under it in *bits when given.
inline int rice_parameter(std::span<const std::uint64_t> gaps, std::uint64_t* bits = nullptr) {
  if (bits) *bits = 0;
  if (gaps.empty()) return 0;
  std::uint64_t total = 0;
  for (std::uint64_t d : gaps) total += d;
  const double mean = double(total) / double(gaps.size());
  const int guess = mean >= 1.0 ? int(std::floor(std::log2(mean))) : 0;
  int best = 0;
  std::uint64_t best_bits = std::numeric_limits<std::uint64_t>::max();
  for (int b = std::max(0, guess - 1); b <= std::min(31, guess + 2); ++b) {
    std::uint64_t n = gaps.size() * std::uint64_t(1 + b);
    for (std::uint64_t d : gaps) n += d >> b;
    if (n < best_bits) best_bits = n, best = b;
  }
  if (bits) *bits = best_bits;
  return best;
}

class BitReader {
 public:
  BitReader(std::span<const std::byte> in, const char* what) : in_(in), what_(what) {}
  std::uint32_t get(int bits) {
    if (bits == 0) return 0;
    if (fill_ < bits) {
      refill();
      if (fill_ < bits) throw Error(std::string(what_) + ": the encoding ends early (truncated or corrupt bytes)");
    }
    const auto v = std::uint32_t(acc_ & BitWriter::mask(bits));
    acc_ >>= bits;
    fill_ -= bits;
    return v;
  }
  // limit bounds the quotient so that corrupt input cannot spin for long. The unary part is
  // counted a word at a time: the ones below the held bits' first zero.
  std::uint64_t get_rice(int b, std::uint64_t limit) {
    std::uint64_t q = 0;
    for (;;) {
      refill();
      if (fill_ == 0) throw Error(std::string(what_) + ": the encoding ends early (truncated or corrupt bytes)");
      const int ones = std::countr_one(acc_);  // the bits above the held ones are zero
      if (ones < fill_) {                      // the code's zero is held: drop the ones and it
        q += std::uint64_t(ones);
        acc_ >>= ones + 1;
        fill_ -= ones + 1;
        break;
      }
      q += std::uint64_t(fill_);  // every held bit is a one
      acc_ = 0;
      fill_ = 0;
      if (q > limit) break;
    }
    if (q > limit) throw Error(std::string(what_) + ": a Rice code is out of range (corrupt bytes)");
    return (q << b) | get(b);
  }
  // Bytes read so far, the partly used last byte included (the whole bytes held are not).
  std::size_t bytes_used() const { return pos_ - std::size_t(fill_ / 8); }

 private:
  std::span<const std::byte> in_;
  const char* what_;
  std::size_t pos_ = 0;
  std::uint64_t acc_ = 0;
  int fill_ = 0;

  // Holds at least 49 bits (at most 56), or every bit left: whole bytes, never past the end.
  void refill() {
    while (fill_ <= 48 && pos_ < in_.size()) {
      acc_ |= std::uint64_t(in_[pos_++]) << fill_;
      fill_ += 8;
    }
  }
};

}  // namespace gs::compress::detail
