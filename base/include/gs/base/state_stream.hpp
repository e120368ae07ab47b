#pragma once
// The state of a running object (a compressor, its residual memory, the stage controller) as
// bytes, for checkpoints: StateWriter appends fixed-width little-endian fields to a byte string;
// StateReader reads them back in the same order and throws gs::Error naming `what` when the bytes
// end early or a count is implausible, so a damaged checkpoint never reads out of bounds.
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gs/base/error.hpp"

namespace gs {

static_assert(std::endian::native == std::endian::little, "state streams are little-endian");

class StateWriter {
 public:
  template <class T>
  requires std::is_arithmetic_v<T>
  void put(T v) {
    const auto at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
  }
  void put_text(std::string_view s) {
    put<std::uint64_t>(s.size());
    bytes_.append(s);
  }
  template <class T>
  requires std::is_arithmetic_v<T>
  void put_array(std::span<const T> v) {
    put<std::uint64_t>(v.size());
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size_bytes());
  }
  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class StateReader {
 public:
  StateReader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  // Set by a reader whose tag names a state written before SIDCo's carried estimate: the parts
  // added with it (the compressor's carried thresholds, the estimate's statistics) are absent
  // and their readers start them afresh.
  bool before_estimates = false;
  // The same for a state written before the link bytes' sum (RunStatistics).
  bool before_links = false;

  template <class T>
  requires std::is_arithmetic_v<T> T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  std::string get_text() { return std::string(take(count(1))); }
  template <class T>
  requires std::is_arithmetic_v<T> std::vector<T> get_array() {
    const std::uint64_t n = count(sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)).data(), n * sizeof(T));
    return v;
  }
  // A field that must equal `expected` (sizes, names): gs::Error naming the field otherwise.
  template <class T>
  void expect(const T& got, const T& expected, std::string_view field) const {
    if (got != expected) fail(std::string(field) + " does not match this run");
  }
  bool at_end() const { return at_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& why) const { throw Error(what_ + ": " + why); }

 private:
  std::string_view take(std::uint64_t n) {
    if (n > bytes_.size() - at_) fail("ends early (damaged or truncated)");
    const auto s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  // A length prefix, checked against what is left before anything is allocated.
  std::uint64_t count(std::uint64_t element_size) {
    const auto n = get<std::uint64_t>();
    if (n > (bytes_.size() - at_) / element_size) fail("ends early (damaged or truncated)");
    return n;
  }
  std::string_view bytes_;
  std::size_t at_ = 0;
  std::string what_;
};

}  // namespace gs
