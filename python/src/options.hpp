#pragma once
// What every part of the _gradscope module shares: memory Python hands over as (address, count),
// and compressor options given as {key: text} read through the C++ option table.
#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/join.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/error.hpp"

namespace gs::python {

// n elements of T at `address`, memory the caller keeps alive for the call.
template <class T>
std::span<T> span_at(std::uintptr_t address, std::uint64_t n) {
  if (n > 0 && address == 0) throw Error("a null address for " + std::to_string(n) + " elements");
  return {reinterpret_cast<T*>(address), static_cast<std::size_t>(n)};
}

inline compress::CompressorOptions parse_options(const std::map<std::string, std::string>& given) {
  compress::CompressorOptions o;
  const auto& rows = compress::compressor_option_rows();
  for (const auto& [key, text] : given) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.key() == key; });
    if (row == rows.end()) {
      throw Error("unknown compressor option '" + key + "': the options are " +
                  join(rows, ", ", [](const auto& r) { return r.key(); }));
    }
    try {
      row->set(o, text);
      row->check(o);
    } catch (const Error& e) {
      // The table's messages name the flag ("--backend 'gpu' is not one of ..."); Python callers
      // gave a keyword: say backend='gpu'.
      std::string m = e.what();
      const std::string quoted = row->flag + " '";
      if (m.starts_with(quoted)) m = row->key() + "='" + m.substr(quoted.size());
      else if (m.starts_with(row->flag + ": '")) m = row->key() + "='" + m.substr(row->flag.size() + 3);
      else if (m.starts_with(row->flag)) m = row->key() + m.substr(row->flag.size());
      throw Error(m);
    }
  }
  return o;
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
