#pragma once
// Items joined into one text with a separator ("a, b, c"), for lists in messages and help texts,
// and a list's text split back into its items.
// proj maps an item to something a std::string can append (a string, string_view or const char*).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// The items of a separated list, as views into text: "a,b" -> {a, b}, "a,,b" -> {a, "", b}, and
// "" -> {} (no item, rather than one empty one).
inline std::vector<std::string_view> split_list(std::string_view text, char separator = ',') {
  std::vector<std::string_view> items;
  if (text.empty()) return items;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(separator, at);
    items.push_back(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return items;
    at = end + 1;
  }
}

}  // namespace gs
