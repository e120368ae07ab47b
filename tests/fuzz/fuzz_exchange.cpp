// One training step of gs::compress::ModelCompressor for any compressor, with peers that send
// whatever the input says: their all-gathered bytes (sparse payloads, the quantizers' and fft's
// own encodings) and their contributions to every all-reduce (scales, levels, codes). The first
// byte picks the compressor. A hostile peer must get a gs::Error, never a crash.
#include <cmath>
#include <cstdlib>
#include <vector>

#include "fuzz_util.hpp"
#include "gs/compress/collectives.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/base/error.hpp"

namespace {

// Rank 0 of three; the two peers' data come from the input.
class HostilePeers final : public gs::compress::Collectives {
 public:
  explicit HostilePeers(gs::fuzz::Stream& in) : in_(in) {}
  int world_size() const override { return 3; }
  int rank() const override { return 0; }
  void allreduce_max(std::span<float> v) override {
    fold(v, [](float a, float b) { return std::fmax(a, b); });
  }
  void allreduce_min(std::span<std::int8_t> v) override {
    fold(v, [](std::int8_t a, std::int8_t b) { return std::min(a, b); });
  }
  void allreduce_sum(std::span<std::int8_t> v) override {
    fold(v, [](std::int8_t a, std::int8_t b) { return std::int8_t(std::uint8_t(a) + std::uint8_t(b)); });
  }
  void allreduce_sum(std::span<std::int32_t> v) override {
    fold(v, [](std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) + std::uint32_t(b)); });
  }
  void allreduce_sum(std::span<std::int64_t> v) override {
    fold(v, [](std::int64_t a, std::int64_t b) { return std::int64_t(std::uint64_t(a) + std::uint64_t(b)); });
  }
  void allreduce_sum(std::span<float> v) override {
    fold(v, [](float a, float b) { return a + b; });
  }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    std::vector<std::vector<std::byte>> all{std::vector<std::byte>(mine.begin(), mine.end())};
    for (int peer = 1; peer < 3; ++peer) {
      // Mostly the peer's own-looking payload (mine, with some bytes changed), else raw input.
      if (in_.take<std::uint8_t>() & 1) {
        auto b = all.front();
        const std::size_t edits = in_.take<std::uint8_t>() % 8;
        for (std::size_t e = 0; e < edits && !b.empty(); ++e)
          b[in_.take<std::uint32_t>() % b.size()] = std::byte(in_.take<std::uint8_t>());
        all.push_back(std::move(b));
      } else {
        all.push_back(in_.bytes(in_.take<std::uint16_t>() % 4096));
      }
    }
    return all;
  }

 private:
  template <class T, class Op>
  void fold(std::span<T> v, Op op) {
    for (int peer = 1; peer < 3; ++peer)
      for (T& x : v) x = op(x, in_.take<T>());
  }
  gs::fuzz::Stream& in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gs::fuzz::Stream in(data, size);
  const auto names = gs::compress::compressor_names();
  const std::string_view name = names[in.take<std::uint8_t>() % names.size()];
  if (name == "variance") return 0;  // needs per-sample variances; its payload is a sparse one
  const std::vector<gs::compress::TensorSpec> tensors{{"w", 300}, {"b", 20}};
  try {
    gs::compress::ModelCompressor mc(
        tensors, gs::compress::Granularity::layer, 0,
        gs::compress::make_compressor(name, gs::compress::density_based(name) ? 0.05 : 1.0));
    std::vector<float> grad(mc.numel()), out(mc.numel());
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = std::sin(float(i)) * 1e-3f;
    HostilePeers peers(in);
    for (int step = 0; step < 2; ++step) mc.step(grad, peers, out);
  } catch (const gs::Error&) {
  }
  return 0;
}
