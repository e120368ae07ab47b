#pragma once
// What every part of the _gradscope module shares: memory Python hands over as (address, count),
// vectors handed back as NumPy arrays, and options given as {key: text} read through a C++ option
// table (the compressors', `gradscope analyze`'s), with the table's messages in Python's words.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "gs/base/join.hpp"
#include "gs/base/option_table.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/base/error.hpp"

namespace gs::python {

// n elements of T at `address`, memory the caller keeps alive for the call.
template <class T>
std::span<T> span_at(std::uintptr_t address, std::uint64_t n) {
  if (n > 0 && address == 0) throw Error("a null address for " + std::to_string(n) + " elements");
  return {reinterpret_cast<T*>(address), static_cast<std::size_t>(n)};
}

// A NumPy array that owns `values` (moved into a capsule, no copy).
template <class T>
pybind11::array_t<T> owned_array(std::vector<T>&& values) {
  auto* heap = new std::vector<T>(std::move(values));
  pybind11::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return pybind11::array_t<T>({heap->size()}, {sizeof(T)}, heap->data(), owner);
}

// A message of the core in Python's words: each flag of `rows` becomes its keyword (a switch
// "force=True", "--backend 'gpu'" "backend='gpu'", "--stages: 'x'" "stages='x'"), and each flag of
// `words` ({flag, word}) its word. Only whole flags: "--on-device-error" is not "--on".
template <class C>
std::string in_python_words(std::string m, const std::vector<OptionRow<C>>& rows,
                            const std::vector<std::pair<std::string, std::string>>& words = {}) {
  std::vector<std::pair<std::string, std::string>> swaps;
  for (const auto& r : rows) {
    swaps.emplace_back(r.flag + " '", r.key() + "='");
    swaps.emplace_back(r.flag + ": '", r.key() + "='");
    swaps.emplace_back(r.flag, r.kind == ValueKind::flag ? r.key() + "=True" : r.key());
  }
  swaps.insert(swaps.end(), words.begin(), words.end());
  const auto part_of_flag = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; };
  for (const auto& [flag, word] : swaps) {
    for (std::size_t at = m.find(flag); at != std::string::npos; at = m.find(flag, at)) {
      const std::size_t end = at + flag.size();
      const bool whole =
          (at == 0 || !part_of_flag(m[at - 1])) && (flag.back() == '\'' || end == m.size() || !part_of_flag(m[end]));
      if (!whole) {
        at = end;
        continue;
      }
      m.replace(at, flag.size(), word);
      at += word.size();
    }
  }
  return m;
}

// Sets the options `given` ({key: text}) on `into` through the rows of `rows` (each parses its
// text and checks its choices); gs::Error in Python's words for an unknown key (listing the keys)
// or a value a row refuses.
template <class C>
void set_options(C& into, const std::vector<OptionRow<C>>& rows, const std::map<std::string, std::string>& given,
                 const std::string& what) {
  for (const auto& [key, text] : given) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.key() == key; });
    if (row == rows.end()) {
      throw Error("unknown " + what + " '" + key + "': the options are " +
                  join(rows, ", ", [](const auto& r) { return r.key(); }));
    }
    try {
      row->set(into, text);
      row->check(into);
    } catch (const Error& e) {
      throw Error(in_python_words(e.what(), rows));
    }
  }
}

inline compress::CompressorOptions parse_options(const std::map<std::string, std::string>& given) {
  compress::CompressorOptions o;
  set_options(o, compress::compressor_option_rows(), given, "compressor option");
  return o;
}

// The rows of an option table for Python (gradscope/_options.py): key, flag, help, default (as
// text), kind ("text", "integer", "real", "flag", "int_list", "real_list", "text_list"), list
// (a comma list) and choices.
template <class C>
pybind11::list option_row_dicts(const std::vector<OptionRow<C>>& rows) {
  static const char* kinds[] = {"text", "integer", "real", "flag", "int_list", "real_list", "text_list"};
  pybind11::list out;
  for (const auto& r : rows) {
    pybind11::dict d;
    d["key"] = r.key();
    d["flag"] = r.flag;
    d["help"] = r.help;
    d["default"] = r.get(C{});
    d["kind"] = kinds[static_cast<int>(r.kind)];
    d["list"] = is_list(r.kind);
    d["choices"] = r.choices;
    out.append(d);
  }
  return out;
}

// The key of an option row as its flag ("bits" -> "--bits"); gs::Error for an unknown key.
inline std::string option_flag(const std::string& key) {
  for (const auto& r : compress::compressor_option_rows())
    if (r.key() == key) return r.flag;
  throw Error("unknown compressor option '" + key + "'");
}

// gs::Error, in Python's words, when `given` sets an option (away from its default) that the
// compressor `name` does not read (compress::check_options_read, the rule `gradscope train`
// applies to its flags); `also`: keys the caller reads itself whatever the method.
inline void check_options_read(const std::string& name, const std::map<std::string, std::string>& given,
                               const std::vector<std::string>& also) {
  std::vector<std::string> also_flags;
  for (const auto& key : also) also_flags.push_back(option_flag(key));
  const std::vector<std::string_view> also_views(also_flags.begin(), also_flags.end());
  compress::check_options_read(name, compress::options_set(parse_options(given)), also_views,
                               compress::OptionSpelling::keyword);
}

}  // namespace gs::python
