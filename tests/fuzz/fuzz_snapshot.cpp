// The snapshot reader (gs::data::SnapshotReader over a file image) on snapshots edited by the
// input (h5_edit.hpp): a clear gs::Error, or every step and layer it lists reads back at the sizes
// it states.
#include <cstdlib>

#include "base_files.hpp"
#include "fuzz_util.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "h5_edit.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = gs::fuzz::edited_image(gs::fuzz::base_files().snapshot, data, size);
  const gs::data::FileImage image{bytes, "fuzz.h5"};
  try {
    gs::data::SnapshotReader r(image);
    const auto& layers = r.layers();
    for (std::size_t s = 0; s < std::min<std::size_t>(r.step_count(), 4); ++s) {
      (void)r.steps()[s];
      (void)r.refresh();
      for (std::size_t l = 0; l < std::min<std::size_t>(layers.size(), 8); ++l) {
        const auto v = r.read(s, l);
        if (std::int64_t(v.size()) != layers[l].numel()) std::abort();
      }
      if (std::int64_t(r.read_model(s).size()) != r.total_numel()) std::abort();
    }
  } catch (const gs::Error&) {
  }
  return 0;
}
