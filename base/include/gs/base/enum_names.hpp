#pragma once
// An enum's names as the front ends spell them, in one table per enum: to_string, parsing and the
// "use a, b or c" of an error message all read it, so a value and its name are written once.
//
//   constexpr gs::EnumName<Granularity> kGranularities[] = {
//       {Granularity::layer, "layer"}, {Granularity::model, "model"}, {Granularity::bucket, "bucket"}};
//   enum_name(kGranularities, g);                        // "layer"
//   enum_value(kGranularities, "model", "granularity");  // Granularity::model, or gs::Error
#include <cstddef>
#include <string>
#include <string_view>

#include "gs/base/error.hpp"

namespace gs {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` ("?" for a value the table lacks).
template <class E, std::size_t N>
constexpr std::string_view enum_name(const EnumName<E> (&table)[N], E value) {
  for (const auto& row : table)
    if (row.value == value) return row.name;
  return "?";
}

// The value named `name`; gs::Error "unknown WHAT 'name': use a, b or c" otherwise.
template <class E, std::size_t N>
E enum_value(const EnumName<E> (&table)[N], std::string_view name, std::string_view what) {
  for (const auto& row : table)
    if (row.name == name) return row.value;
  std::string use;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) use += i + 1 == N ? " or " : ", ";
    use += table[i].name;
  }
  throw Error("unknown " + std::string(what) + " '" + std::string(name) + "': use " + use);
}

}  // namespace gs
