#pragma once
// Option tables: the settings of a config struct as rows that read and write their value as text.
// One table per config drives every place that lists its settings (command-line flags, checks,
// arguments passed on to worker processes, JSON echoes, Python keyword arguments), so none of them
// is kept in sync by hand.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"

namespace gs {

// How a value reads: a word (or a path), an integer, a real number, a switch, a comma list of
// integers, of real numbers or of words.
enum class ValueKind { text, integer, real, flag, int_list, real_list, text_list };

inline bool is_list(ValueKind k) {
  return k == ValueKind::int_list || k == ValueKind::real_list || k == ValueKind::text_list;
}

// One setting of a config C.
template <class C>
struct OptionRow {
  std::string flag;   // "--variance-alpha": its command-line flag; the key is flag minus "--", '-' as '_'
  std::string alias;  // a short form on the command line ("-j"), or empty
  std::string help;
  ValueKind kind = ValueKind::text;
  std::vector<std::string> choices;  // the values a text option takes (empty: any)
  // The value as text: reals as the shortest text that reads back exactly, lists "6,10",
  // switches "1"/"0".
  std::function<std::string(const C&)> get;
  // Parses text into the config; gs::Error naming the flag when the text is no such value.
  std::function<void(C&, std::string_view)> set;
  // gs::Error naming the flag when the value is out of its range (or not one of the choices).
  std::function<void(const C&)> check;

  // "variance_alpha" for "--variance-alpha": the name in JSON and in Python keyword arguments.
  std::string key() const {
    std::string k = flag.starts_with("--") ? flag.substr(2) : flag;
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
  }
};

namespace option_text {

// The shortest text that reads back as exactly v.
inline std::string real(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

inline std::string int_list(const std::vector<int>& v) {
  return join(v, ",", [](int x) { return std::to_string(x); });
}

[[noreturn]] inline void refuse(std::string_view flag, std::string_view text, const char* what) {
  throw Error(std::string(flag) + ": '" + std::string(text) + "' is not " + what);
}

template <class T>
T parse_integer(std::string_view flag, std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) refuse(flag, text, "an integer");
  return v;
}

inline double parse_real(std::string_view flag, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) refuse(flag, text, "a number");
  return v;
}

inline std::vector<int> parse_int_list(std::string_view flag, std::string_view text) {
  std::vector<int> out;
  for (std::string_view item : split_list(text)) out.push_back(parse_integer<int>(flag, item));
  return out;
}

inline std::string real_list(const std::vector<double>& v) {
  return join(v, ",", [](double x) { return real(x); });
}

inline std::vector<double> parse_real_list(std::string_view flag, std::string_view text) {
  std::vector<double> out;
  for (std::string_view item : split_list(text)) out.push_back(parse_real(flag, item));
  return out;
}

inline std::vector<std::string> parse_text_list(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view item : split_list(text)) out.emplace_back(item);
  return out;
}

}  // namespace option_text

// A row for the field that `access` reaches (a lambda taking a C&, or a const C&, and returning a
// reference to the field: write it generic, [](auto& c) -> auto& { return c.field; }). `check`
// receives the value and throws gs::Error (with the flag in its text) when it is out of range.
template <class T, class C, class Access>
OptionRow<C> option_row(std::string flag, std::string help, Access access, std::function<void(const T&)> check = {},
                        std::vector<std::string> choices = {}) {
  namespace txt = option_text;
  OptionRow<C> o;
  o.flag = std::move(flag);
  o.help = std::move(help);
  o.choices = std::move(choices);
  if constexpr (std::is_same_v<T, bool>) {
    o.kind = ValueKind::flag;
    o.get = [access](const C& c) { return std::string(access(c) ? "1" : "0"); };
    o.set = [access, f = o.flag](C& c, std::string_view t) {
      if (t != "1" && t != "0" && t != "true" && t != "false") txt::refuse(f, t, "a switch (1 or 0)");
      access(c) = t == "1" || t == "true";
    };
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::filesystem::path>) {
    o.kind = ValueKind::text;
    o.get = [access](const C& c) { return std::string(access(c)); };
    o.set = [access](C& c, std::string_view t) { access(c) = std::string(t); };
  } else if constexpr (std::is_same_v<T, double>) {
    o.kind = ValueKind::real;
    o.get = [access](const C& c) { return txt::real(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = txt::parse_real(f, t); };
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    o.kind = ValueKind::int_list;
    o.get = [access](const C& c) { return txt::int_list(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = txt::parse_int_list(f, t); };
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    o.kind = ValueKind::real_list;
    o.get = [access](const C& c) { return txt::real_list(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = txt::parse_real_list(f, t); };
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    o.kind = ValueKind::text_list;
    o.get = [access](const C& c) { return join(access(c), ","); };
    o.set = [access](C& c, std::string_view t) { access(c) = txt::parse_text_list(t); };
  } else {
    static_assert(std::is_integral_v<T>, "option_row: unsupported field type");
    o.kind = ValueKind::integer;
    o.get = [access](const C& c) { return std::to_string(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = txt::parse_integer<T>(f, t); };
  }
  o.check = [access, check, f = o.flag, ch = o.choices](const C& c) {
    const T& v = access(c);
    if constexpr (std::is_same_v<T, std::string>) {
      if (!ch.empty() && std::find(ch.begin(), ch.end(), v) == ch.end()) {
        throw Error(f + " '" + v + "' is not one of " + join(ch, ", "));
      }
    }
    if (check) check(v);
  };
  return o;
}

// The row of an inner config (e.g. a CompressorOptions held by a TrainConfig) as a row of the outer
// one; `inner` reaches the inner config from the outer ([](auto& c) -> auto& { return c.inner; }).
template <class Outer, class Inner, class Access>
OptionRow<Outer> nested_row(const OptionRow<Inner>& row, Access inner) {
  OptionRow<Outer> o;
  o.flag = row.flag;
  o.alias = row.alias;
  o.help = row.help;
  o.kind = row.kind;
  o.choices = row.choices;
  o.get = [g = row.get, inner](const Outer& c) { return g(inner(c)); };
  o.set = [s = row.set, inner](Outer& c, std::string_view t) { s(inner(c), t); };
  o.check = [k = row.check, inner](const Outer& c) { k(inner(c)); };
  return o;
}

}  // namespace gs
