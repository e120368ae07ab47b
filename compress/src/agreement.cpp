#include "gs/compress/agreement.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "gs/base/state_stream.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {
namespace {

std::vector<Setting> read_settings(const std::vector<std::byte>& bytes, int worker) {
  StateReader r(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                "the settings of worker " + std::to_string(worker));
  std::vector<Setting> out(r.get<std::uint32_t>());
  for (Setting& s : out) {
    s.name = r.get_text();
    s.value = r.get_text();
  }
  if (!r.at_end()) r.fail("has bytes after its settings");
  return out;
}

std::string value_text(const Setting* s) { return s ? s->value : std::string("not set"); }

}  // namespace

void agree_settings(Collectives& comm, std::span<const Setting> settings, std::string_view advice) {
  StateWriter w;
  w.put<std::uint32_t>(std::uint32_t(settings.size()));
  for (const Setting& s : settings) {
    w.put_text(s.name);
    w.put_text(s.value);
  }
  std::vector<std::byte> mine(w.bytes().size());
  std::memcpy(mine.data(), w.bytes().data(), mine.size());
  std::vector<std::vector<std::byte>> all;
  try {
    all = comm.allgather(mine);
  } catch (const std::exception& e) {
    throw Error(std::string("the workers' first exchange (their settings) failed: every worker must hand its "
                            "buckets to a compressor made alike (gradscope.ddp: every rank registers the hook); ") +
                e.what());
  }
  // Worker 0's settings against each other worker's, in worker order: every worker finds the same
  // first difference, so every worker stops with the same line.
  const std::vector<Setting> first = read_settings(all.front(), 0);
  for (std::size_t r = 1; r < all.size(); ++r) {
    const std::vector<Setting> theirs = read_settings(all[r], int(r));
    auto find = [](const std::vector<Setting>& v, const std::string& name) -> const Setting* {
      const auto it = std::find_if(v.begin(), v.end(), [&](const Setting& s) { return s.name == name; });
      return it == v.end() ? nullptr : &*it;
    };
    std::vector<std::string> names;
    for (const auto* v : {&first, &theirs})
      for (const Setting& s : *v)
        if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
    for (const std::string& name : names) {
      const Setting* a = find(first, name);
      const Setting* b = find(theirs, name);
      if (a && b && a->value == b->value) continue;
      throw Error("the workers' settings differ: " + name + " is " + value_text(b) + " on worker " + std::to_string(r) +
                  " and " + value_text(a) + " on worker 0; " + std::string(advice));
    }
  }
}

}  // namespace gs::compress
