// Writes a synthetic snapshot for the analysis benchmarks (docs/BENCHMARKS.md) of heavy-tailed
// values, Laplace-like for conv weights and gamma-like (shape 0.6) elsewhere:
//   gs_make_bench_snapshot OUT.h5 [STEPS=1] [--force]
//       a ResNet-50-sized layer list (about 25M parameters), STEPS steps;
//   gs_make_bench_snapshot OUT.h5 --linear L [--force]
//       one step of L x Linear(4096, 4096) (weights and biases; 7: 117M parameters, 64: 1.07B),
//       written from one buffer of 16.8M values that each layer reads at its own offset, so the
//       tool needs 64 MiB whatever L (the layers differ, their values share one draw).
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"

namespace {

std::vector<gs::data::LayerInfo> resnet50_like() {
  std::vector<gs::data::LayerInfo> layers;
  layers.push_back({"conv1.weight", {64, 3, 7, 7}});
  for (int i = 0; i < 10; ++i) {  // 10 x 2.36M
    layers.push_back({"layer" + std::to_string(i) + ".conv.weight", {512, 512, 3, 3}});
    layers.push_back({"layer" + std::to_string(i) + ".bn.weight", {512}});
    layers.push_back({"layer" + std::to_string(i) + ".bn.bias", {512}});
  }
  layers.push_back({"fc.weight", {1000, 2048}});
  layers.push_back({"fc.bias", {1000}});
  return layers;
}

void fill(std::vector<float>& g, bool conv, float scale, std::mt19937_64& rng) {
  std::exponential_distribution<float> expo(1.0f);
  std::gamma_distribution<float> gamma(0.6f, 1.0f);
  for (auto& x : g) x = ((rng() & 1) ? scale : -scale) * (conv ? expo(rng) : gamma(rng));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.h5 [STEPS=1 | --linear L] [--force]\n", argv[0]);
    return 2;
  }
  int steps = 1, linear = 0;
  bool force = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--force")
      force = true;
    else if (a == "--linear" && i + 1 < argc)
      linear = std::atoi(argv[++i]);
    else
      steps = std::atoi(argv[i]);
  }
  std::vector<gs::data::LayerInfo> layers;
  if (linear > 0) {
    for (int l = 0; l < linear; ++l) {
      layers.push_back({"fc" + std::to_string(l) + ".weight", {4096, 4096}});
      layers.push_back({"fc" + std::to_string(l) + ".bias", {4096}});
    }
  } else {
    layers = resnet50_like();
  }
  gs::data::SnapshotMeta meta;
  meta.model = linear > 0 ? "linear-4096x" + std::to_string(linear) : "bench-25m";
  meta.dataset = "synthetic";
  meta.seed = 1;
  gs::data::WriterOptions wo;
  wo.force = force;
  wo.compression = "none";
  try {
    gs::data::SnapshotWriter w(argv[1], meta, layers, wo);
    std::mt19937_64 rng(12345);
    std::int64_t total = 0;
    for (const auto& l : layers) total += l.numel();
    if (linear > 0) {
      std::vector<float> shared(std::size_t{4096} * 4096 + 2 * static_cast<std::size_t>(linear));
      fill(shared, false, 1e-3f, rng);
      std::vector<std::span<const float>> spans;
      for (std::size_t l = 0; l < layers.size(); ++l)
        spans.emplace_back(shared.data() + l, static_cast<std::size_t>(layers[l].numel()));
      w.append({0, 1.0, 0.1}, spans);
    } else {
      std::vector<std::vector<float>> grads(layers.size());
      for (int s = 0; s < steps; ++s) {
        std::vector<std::span<const float>> spans;
        for (std::size_t l = 0; l < layers.size(); ++l) {
          grads[l].resize(static_cast<std::size_t>(layers[l].numel()));
          fill(grads[l], layers[l].shape.size() == 4, 1e-3f / static_cast<float>(1 + l % 5), rng);
          spans.emplace_back(grads[l]);
        }
        w.append({s, 1.0, 0.1}, spans);
      }
    }
    std::printf("%s: %zu layers, %lld parameters, %d steps\n", argv[1], layers.size(), static_cast<long long>(total),
                linear > 0 ? 1 : steps);
  } catch (const gs::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
