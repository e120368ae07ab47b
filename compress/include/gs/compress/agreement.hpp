#pragma once
// The settings every worker of a run must share, compared across the workers in one all-gather:
// a worker started with another ratio, method, warm-up or schedule would otherwise train silently
// on other rules, or call other collectives than its peers and hang until a timeout. Both front
// ends use it: `gradscope train` for its flags, the DDP hook (BucketCompressor) for the State's
// keywords.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/compress/collectives.hpp"

namespace gs::compress {

// One setting as the front end names it (a flag, a keyword) and its value as text.
struct Setting {
  std::string name, value;
};

// Every worker passes its settings in the same order; one all-gather compares them. gs::Error on
// every worker alike when they differ, naming the first setting that differs with this worker's
// value and another's ("ratio is 0.02 on worker 1 and 0.01 on worker 0"), then `advice`.
void agree_settings(Collectives& comm, std::span<const Setting> settings, std::string_view advice);

}  // namespace gs::compress
