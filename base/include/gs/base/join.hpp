#pragma once
// Items joined into one text with a separator ("a, b, c"), for lists in messages and help texts.
// proj maps an item to something a std::string can append (a string, string_view or const char*).
#include <functional>
#include <string>
#include <string_view>

namespace gs {

template <class Range, class Proj = std::identity>
std::string join(const Range& items, std::string_view separator, Proj proj = {}) {
  std::string s;
  bool first = true;
  for (const auto& item : items) {
    if (!first) s += separator;
    first = false;
    s += std::invoke(proj, item);
  }
  return s;
}

}  // namespace gs
