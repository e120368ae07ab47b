// The IDX readers (Fashion-MNIST images and labels, gzip-compressed or raw) on any bytes: the first
// byte picks the reader. A clear gs::Error or data of the sizes the header states.
#include <cstdlib>

#include "fuzz_util.hpp"
#include "gs/data/fashion_mnist.hpp"
#include "gs/base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  gs::fuzz::MemFile file(data + 1, size - 1);
  try {
    if (data[0] & 1) {
      const auto l = gs::data::read_idx_labels(file.path());
      (void)l;
    } else {
      const auto im = gs::data::read_idx_images(file.path());
      if (std::uint64_t(im.count * im.rows * im.cols) != im.pixels.size()) std::abort();
    }
  } catch (const gs::Error&) {
  }
  return 0;
}
