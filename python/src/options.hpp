#pragma once
// What every part of the _gradscope module shares: memory Python hands over as (address, count),
// and compressor options given as {key: text} read through the C++ option table.
#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>

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

}  // namespace gs::python
