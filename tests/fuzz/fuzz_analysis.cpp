// The analysis store's reader (gs::analyzer::AnalysisReader over a file image) on stores edited by
// the input (h5_edit.hpp): a clear gs::Error, or every table it holds loads.
#include "base_files.hpp"
#include "fuzz_util.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"
#include "h5_edit.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = gs::fuzz::edited_image(gs::fuzz::base_files().analysis, data, size);
  const gs::data::FileImage image{bytes, "fuzz.analysis.h5"};
  try {
    gs::analyzer::AnalysisReader r(image);
    (void)r.source();
    (void)r.options();
    (void)r.created();
    (void)r.steps();
    (void)r.vectors();
    (void)r.fits();
    (void)r.tails();
    (void)r.qq();
    (void)r.thresholds();
  } catch (const gs::Error&) {
  }
  return 0;
}
