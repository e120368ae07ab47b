// Error against bits of the `fft` compressor (frequency-domain sparsification with range-based
// floats), one exchange of one worker at n = 2^20. Counters: rel_l2 = ||sent - g|| / ||g||,
// quant_l2 = ||sent - sent32|| / ||sent32|| where sent32 keeps the same bins in FP32 (the codec's
// own error), bytes_per_elem = wire bytes / n, bits_per_value = wire bits per real value sent
// (indices included). Baselines in the
// same run: topk at the same ratio (8 bytes a value) and fft with FP32 coefficients (E 8, M 23),
// whose error is the sparsification alone. Keep fractions are the ratio after the warm-up.
//   gs_bench_fft --benchmark_format=json > fft.json
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <random>
#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/base/error.hpp"

namespace {

constexpr std::size_t kN = std::size_t(1) << 20;

// signal 0: Laplace (scale 1e-3, heavy-tailed, white); 1: the same innovations through an AR(1)
// filter (rho 0.9), whose energy sits at low frequencies.
const std::vector<float>& data(int signal) {
  static std::map<int, std::vector<float>> cache;
  auto& g = cache[signal];
  if (g.empty()) {
    std::mt19937_64 rng(7);
    std::exponential_distribution<float> e(1000.0f);
    g.resize(kN);
    for (auto& v : g) v = (rng() & 1) ? e(rng) : -e(rng);
    if (signal == 1)
      for (std::size_t i = 1; i < kN; ++i) g[i] += 0.9f * g[i - 1];
  }
  return g;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// An fft compressor past its warm-up (theta = ratio).
std::unique_ptr<gs::compress::Compressor> make_fft(double ratio, int e, int m) {
  gs::compress::CompressorOptions o;
  o.fft_exponent_bits = e;
  o.fft_mantissa_bits = m;
  auto c = gs::compress::make_compressor("fft", ratio, o);
  for (int i = 0; i < 200; ++i) c->end_step();
  return c;
}

// What the fft compressor sends with FP32 coefficients (same bins as any layout: the selection
// happens before the encoding).
const std::vector<float>& sent_fp32(int signal, double ratio) {
  static std::map<std::pair<int, double>, std::vector<float>> cache;
  auto& sent = cache[{signal, ratio}];
  if (sent.empty()) {
    auto c = make_fft(ratio, 8, 23);
    gs::compress::SoloCollectives comm;
    std::vector<float> mean(kN);
    sent.resize(kN);
    c->exchange(data(signal), "g", comm, sent, mean);
  }
  return sent;
}

// Args: signal, ratio in 1/1000, exponent bits, mantissa bits.
void BM_Fft(benchmark::State& s) {
  const int signal = int(s.range(0));
  const auto& g = data(signal);
  const double ratio = double(s.range(1)) / 1000.0;
  std::unique_ptr<gs::compress::Compressor> c;
  try {
    c = make_fft(ratio, int(s.range(2)), int(s.range(3)));
  } catch (const gs::Error& e) {
    s.SkipWithError(e.what());
    return;
  }
  gs::compress::SoloCollectives comm;
  std::vector<float> sent(kN), mean(kN);
  gs::compress::Compressor::Exchanged r;
  for (auto _ : s) r = c->exchange(g, "g", comm, sent, mean);
  s.counters["rel_l2"] = rel_l2(sent, g);
  s.counters["quant_l2"] = rel_l2(sent, sent_fp32(signal, ratio));
  s.counters["bytes_per_elem"] = double(r.wire_bytes) / double(kN);
  s.counters["bits_per_value"] = 8.0 * double(r.wire_bytes) / double(r.info.selected);
  s.counters["density"] = r.info.density();
}

// Args: signal, ratio in 1/1000.
void BM_Topk(benchmark::State& s) {
  const auto& g = data(int(s.range(0)));
  auto c = gs::compress::make_compressor("topk", double(s.range(1)) / 1000.0);
  gs::compress::Compressed out;
  for (auto _ : s) out = c->compress(g, "g");
  std::vector<float> sent(kN);
  c->decompress(out.payload, sent);
  s.counters["rel_l2"] = rel_l2(sent, g);
  s.counters["bytes_per_elem"] = double(out.payload.wire_bytes()) / double(kN);
  s.counters["bits_per_value"] = 64.0;
  s.counters["density"] = out.info.density();
}

void fft_args(benchmark::internal::Benchmark* b) {
  for (int signal : {0, 1})
    for (int ratio : {10, 100}) {
      for (int e = 2; e <= 5; ++e)
        for (int m = 3; m <= 12; ++m) b->Args({signal, ratio, e, m});
      b->Args({signal, ratio, 8, 23});
    }
}

BENCHMARK(BM_Topk)->ArgsProduct({{0, 1}, {10, 100}})->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Fft)->Apply(fft_args)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
