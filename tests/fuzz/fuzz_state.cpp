// The checkpoint loader of the compressed step: the state stream (gs::StateReader) of a DDP hook
// core (BucketCompressor: residuals and velocities by parameter, the skip count, the statistics,
// Accordion's detector, the stage controller) and of `gradscope train`'s (ModelCompressor). The
// first byte picks the core (state_setups.hpp); the rest is its state. A damaged or hostile state
// must be refused with a gs::Error, and a state that loads must train on without a crash.
#include <cstdlib>
#include <string_view>

#include "gs/base/error.hpp"
#include "state_setups.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto& setups = gs::fuzz::state_setups();
  gs::fuzz::StateSubject subject(setups[data[0] % setups.size()]);
  gs::StateReader r(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), "fuzzed state");
  try {
    subject.load(r);
  } catch (const gs::Error&) {
    return 0;
  }
  // Loaded: the next steps run on it (a bad residual, velocity or counter would show here).
  try {
    for (std::uint64_t s = 0; s < 2; ++s) subject.step(100 + s);
  } catch (const gs::Error&) {
  }
  return 0;
}
