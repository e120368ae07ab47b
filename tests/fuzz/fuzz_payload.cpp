// The wire decoder of every payload (gs::compress::decode: sparse index/value pairs, dense codes
// with their scale, the range floats, fft bins), then every compressor's decoding of what it
// accepted (decompress and aggregate, as a worker does with a peer's bytes). A buggy or hostile
// peer must get a gs::Error, never a crash or a write out of bounds.
#include <cstdlib>
#include <vector>

#include "fuzz_util.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/payload.hpp"
#include "gs/base/error.hpp"

namespace {

const std::vector<std::unique_ptr<gs::compress::Compressor>>& compressors() {
  static const auto all = [] {
    std::vector<std::unique_ptr<gs::compress::Compressor>> v;
    for (auto name : gs::compress::compressor_names())
      v.push_back(gs::compress::make_compressor(name, gs::compress::density_based(name) ? 0.01 : 1.0));
    return v;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gs::compress::Payload p;
  try {
    p = gs::compress::decode({reinterpret_cast<const std::byte*>(data), size});
  } catch (const gs::Error&) {
    return 0;
  }
  // A worker decodes a peer's payload only for a vector of its own size: a small one here.
  if (p.n > (std::uint64_t{1} << 16)) return 0;
  std::vector<float> out(p.n);
  for (const auto& c : compressors()) {
    try {
      c->decompress(p, out);
    } catch (const gs::Error&) {
    }
    try {
      const gs::compress::Payload two[2] = {p, p};
      c->aggregate(two, out);
    } catch (const gs::Error&) {
    }
  }
  return 0;
}
