// Google Benchmark drivers of the CPU backend. Each family runs at n = 1e6, 1e7 (add 1e8 with
// --benchmark_filter); BM_Read is the baseline: one plain read pass over the same vector.
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "gs/kernels/cpu.hpp"

namespace {

const std::vector<float>& data(std::int64_t n) {
  static std::map<std::int64_t, std::vector<float>> cache;
  auto& g = cache[n];
  if (g.empty()) {
    std::mt19937_64 rng(7);
    std::exponential_distribution<float> e(1000.0f);
    g.resize(static_cast<std::size_t>(n));
    for (auto& v : g) v = (rng() & 1) ? e(rng) : -e(rng);
  }
  return g;
}

void BM_Read(benchmark::State& s) {
  const auto& g = data(s.range(0));
  for (auto _ : s) benchmark::DoNotOptimize(gs::kernels::cpu::sum(g));
  s.SetBytesProcessed(s.iterations() * s.range(0) * 4);
}
void BM_Stats(benchmark::State& s) {
  const auto& g = data(s.range(0));
  for (auto _ : s) benchmark::DoNotOptimize(gs::kernels::cpu::stats(g));
  s.SetBytesProcessed(s.iterations() * s.range(0) * 4);
}
void BM_Compact(benchmark::State& s) {
  const auto& g = data(s.range(0));
  const double density = 1.0 / double(s.range(1));
  const double t = -std::log(density) / 1000.0;  // exponential magnitudes: P(x > t) = density
  std::vector<std::int32_t> idx(g.size());
  std::vector<float> val(g.size());
  for (auto _ : s) benchmark::DoNotOptimize(gs::kernels::cpu::compact_above(g, t, std::span(idx), std::span(val)));
  s.SetBytesProcessed(s.iterations() * s.range(0) * 4);
}
void BM_TopK(benchmark::State& s) {
  const auto& g = data(s.range(0));
  const auto k = static_cast<std::uint64_t>(double(g.size()) / double(s.range(1)));
  std::vector<std::int32_t> idx(k);
  std::vector<float> val(k);
  for (auto _ : s) gs::kernels::cpu::topk(g, k, std::span(idx), std::span(val));
  s.SetBytesProcessed(s.iterations() * s.range(0) * 4);
}

BENCHMARK(BM_Read)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Stats)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Compact)->ArgsProduct({{1'000'000, 10'000'000}, {10, 100, 1000}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopK)->ArgsProduct({{1'000'000, 10'000'000}, {10, 100, 1000}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
