// The .npy reader (gs::data::read_npy) on any bytes: a clear gs::Error or a consistent array.
#include <cstdlib>
#include <functional>
#include <numeric>

#include "fuzz_util.hpp"
#include "gs/data/npy.hpp"
#include "gs/base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gs::fuzz::MemFile file(data, size);
  try {
    const gs::data::NpyArray a = gs::data::read_npy(file.path());
    std::int64_t count = 1;
    for (auto d : a.shape) {
      if (d < 0) std::abort();  // accepted a negative dimension
      count *= d;
    }
    if (std::uint64_t(count) != a.values.size()) std::abort();  // shape and values disagree
  } catch (const gs::Error&) {
  }
  return 0;
}
