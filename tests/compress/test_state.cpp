// Checkpoints of a ModelCompressor: for every compressor, saving its state between steps and
// loading it into a fresh one continues bit for bit (residuals, controllers, random streams,
// per-tensor sums); a state that is damaged or of another compressor is refused.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gs/compress/model_compressor.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {

const std::vector<TensorSpec> kModel = {{"fc1.weight", 3000}, {"fc1.bias", 30}, {"fc2.weight", 1500}};

std::vector<float> laplace(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(100.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = (rng() & 1 ? 1.0f : -1.0f) * e(rng);
  return g;
}

std::unique_ptr<ModelCompressor> make(std::string_view name) {
  CompressorOptions o;
  o.seed = 17;
  auto mc = std::make_unique<ModelCompressor>(kModel, Granularity::layer, 0,
                                              make_compressor(name, density_based(name) ? 0.01 : 1.0, o));
  if (supports_momentum_correction(mc->compressor())) mc->set_momentum_correction(0.9);
  return mc;
}

// One step of one worker; the update it applies.
std::vector<float> step(ModelCompressor& mc, std::uint64_t seed) {
  SoloCollectives solo;
  const auto g = laplace(mc.numel(), seed);
  if (mc.compressor().needs_gradient_variance()) {
    std::vector<float> v(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) v[i] = 4.0f * g[i] * g[i];  // most wait, their sums carry over
    mc.set_gradient_variance(v);
  }
  std::vector<float> out(mc.numel());
  mc.step(g, solo, out);
  return out;
}

std::string state_of(const ModelCompressor& mc) {
  gs::StateWriter w;
  mc.save_state(w);
  return w.take();
}

}  // namespace

TEST(CompressorState, EveryCompressorContinuesExactlyFromItsState) {
  for (const auto name : compressor_names()) {
    auto original = make(name);
    for (std::uint64_t s = 0; s < 7; ++s) step(*original, s);  // mid-window for SIDCo's controller
    const std::string saved = state_of(*original);
    auto restored = make(name);
    gs::StateReader r(saved, "test state");
    restored->load_state(r);
    EXPECT_TRUE(r.at_end()) << name;
    EXPECT_EQ(state_of(*restored), saved) << name;
    for (std::uint64_t s = 7; s < 14; ++s) ASSERT_EQ(step(*original, s), step(*restored, s)) << name << " step " << s;
    // Without the state the run differs (what the state holds matters), except for the dense
    // exchange, which carries nothing from step to step.
    auto fresh = make(name);
    if (name != "none") {
      EXPECT_NE(step(*fresh, 14), step(*original, 14)) << name;
    }
  }
}

TEST(CompressorState, DamagedOrForeignStatesAreRefused) {
  auto a = make("sidco-e");
  for (std::uint64_t s = 0; s < 3; ++s) step(*a, s);
  const std::string saved = state_of(*a);
  for (std::size_t cut : {std::size_t(0), std::size_t(5), saved.size() / 2, saved.size() - 1}) {
    auto b = make("sidco-e");
    gs::StateReader r(std::string_view(saved).substr(0, cut), "state");
    EXPECT_THROW(b->load_state(r), gs::Error) << cut;
  }
  auto other = make("sidco-gp");
  gs::StateReader r(saved, "state");
  try {
    other->load_state(r);
    FAIL() << "a sidco-e state loaded into sidco-gp";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the compressor does not match"), std::string::npos) << e.what();
  }
  ModelCompressor smaller({{"fc1.weight", 3000}}, Granularity::layer, 0, make_compressor("sidco-e", 0.01));
  gs::StateReader r2(saved, "state");
  EXPECT_THROW(smaller.load_state(r2), gs::Error);
}
