// The DDP hook's compressed step, part by part, on one worker's bucket under momentum correction
// (BucketCompressor::exchange with momentum_correction 0.9, density 0.01): the whole step, then
// each part it is made of, alone on the same vectors:
//   momentum   u = m u + g                      (MomentumCorrection::advance)
//   residual   acc = e + u                      (ResidualMemory::accumulate)
//   fused      both in one pass (MomentumCorrection::advance_into)
//   fused_stats the same pass taking SIDCo-E's stage-1 statistics on the way, as the hook runs it
//   select     the compressor's selection of acc (SIDCo-E carried, SIDCo-E fit, top-k)
//   given      SIDCo-E carried's selection given those statistics (Compressor::compress_given)
//   plain      a fresh compressor's selection of the same acc: what gradscope.select costs
//   encode     the payload to its wire bytes
//   decode     the workers' payloads back, and their mean into the bucket (Compressor::aggregate)
//   commit     e and u zeroed where sent (ResidualMemory::commit, MomentumCorrection::commit)
//   read       one read pass over the bucket: the baseline every figure is a ratio of
// The accumulator is the one a run of 30 steps of drifting gradients leaves (the same kind of
// tail as training's: factor masking cuts it just above the last threshold). One worker: the
// all-gather is a copy (SoloCollectives), so the step's time is the hook's own work.
// GS_BENCH_HOOK_N sets the bucket's size (default 825000; the study ViT's larger bucket holds
// 262666, which sits in L2/L3).
//   gs_bench_hook --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/momentum.hpp"
#include "gs/compress/payload.hpp"
#include "gs/compress/residual.hpp"
#include "gs/kernels/cpu.hpp"

namespace {

using namespace gs::compress;

// The bucket: a 825k-parameter model in one, unless GS_BENCH_HOOK_N says otherwise.
const std::uint64_t kN = [] {
  const char* v = std::getenv("GS_BENCH_HOOK_N");
  return v && *v ? std::stoull(v) : std::uint64_t{825000};
}();
constexpr double kDensity = 0.01;
constexpr int kWarmSteps = 30;

// Step s's gradient: a drift per element that persists, and noise that does not.
std::vector<float> gradient(int step) {
  std::mt19937_64 fixed(11), noisy(std::uint64_t(step) * 7919 + 3);
  std::exponential_distribution<float> e(1000.0f);
  std::bernoulli_distribution sign(0.5);
  std::normal_distribution<float> noise(0.0f, 2e-3f);
  std::vector<float> g(kN);
  for (auto& v : g) v = (sign(fixed) ? 1.0f : -1.0f) * e(fixed) + noise(noisy);
  return g;
}

const std::vector<float>& step_gradient(int step) {
  static std::map<int, std::vector<float>> cache;
  auto& g = cache[step];
  if (g.empty()) g = gradient(step);
  return g;
}

CompressorOptions options(const std::string& estimate) {
  CompressorOptions o;
  o.sidco_estimate = estimate;
  return o;
}

// A hook state past kWarmSteps steps of method (estimate: SIDCo's), and the step's vectors.
struct Warm {
  std::unique_ptr<BucketCompressor> bucket;
  SoloCollectives solo;
  std::vector<BucketParam> params{{1, kN}};
  std::vector<float> out = std::vector<float>(kN);
  Warm(const std::string& method, const std::string& estimate) {
    bucket = std::make_unique<BucketCompressor>(make_compressor(method, kDensity, options(estimate)), WarmupSchedule{});
    bucket->set_momentum_correction(0.9, "momentum_correction");
    for (int s = 0; s < kWarmSteps; ++s) bucket->exchange(0, step_gradient(s), params, solo, out, true);
  }
};

// The vectors of one step of the parts: u, e and g as the warm run leaves them, and acc.
struct Parts {
  MomentumCorrection momentum;
  ResidualMemory residual;
  std::vector<float> acc;
  std::unique_ptr<Compressor> compressor;
  explicit Parts(const std::string& method, const std::string& estimate)
      : compressor(make_compressor(method, kDensity, options(estimate))) {
    momentum = MomentumCorrection(0.9, *compressor, "momentum_correction");
    // The same recursion as the hook, with exact top-k's masks (the parts' vectors, not their cost).
    auto topk = make_compressor("topk", kDensity, {});
    for (int s = 0; s < kWarmSteps; ++s) {
      const auto u = momentum.advance("b", step_gradient(s));
      const auto a = residual.accumulate("b", u);
      const Compressed c = topk->compress(a, "b");
      residual.commit("b", c.payload, *topk);
      momentum.commit("b", c.payload, *topk);
    }
    const auto u = momentum.advance("b", step_gradient(kWarmSteps));
    const auto a = residual.accumulate("b", u);
    acc.assign(a.begin(), a.end());
    residual.discard("b");
    momentum.discard("b");
    // The compressor learns the bucket as the hook's does (the carried estimate's factor).
    for (int s = 0; s < 3; ++s) compressor->compress(acc, "b");
  }
};

void step(benchmark::State& st, const std::string& method, const std::string& estimate) {
  Warm w(method, estimate);
  int s = kWarmSteps;
  for (auto _ : st) {
    w.bucket->exchange(0, step_gradient(s % (kWarmSteps + 2)), w.params, w.solo, w.out, true);
    ++s;
  }
  const RunSummary r = w.bucket->summary();
  st.counters["corrected_share"] = r.corrected_share;
  st.counters["estimate_in_band"] = r.estimate_in_band;
}

void momentum(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto& g = step_gradient(kWarmSteps);
  for (auto _ : st) {
    benchmark::DoNotOptimize(p.momentum.advance("b", g).data());
    p.momentum.discard("b");
  }
}

void residual(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto& u = step_gradient(kWarmSteps);
  for (auto _ : st) {
    benchmark::DoNotOptimize(p.residual.accumulate("b", u).data());
    p.residual.discard("b");
  }
}

void fused(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto& g = step_gradient(kWarmSteps);
  for (auto _ : st) {
    benchmark::DoNotOptimize(p.momentum.advance_into("b", g, p.residual).data());
    p.residual.discard("b");
    p.momentum.discard("b");
  }
}

void fused_stats(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto& g = step_gradient(kWarmSteps);
  for (auto _ : st) {
    StatsOnWrite stats{*p.compressor->stats_on_write(), std::nullopt};
    benchmark::DoNotOptimize(p.momentum.advance_into("b", g, p.residual, &stats).data());
    benchmark::DoNotOptimize(stats.taken->sum);
    p.residual.discard("b");
    p.momentum.discard("b");
  }
}

void given(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto first = gs::kernels::cpu::stats(p.acc, *p.compressor->stats_on_write());
  for (auto _ : st) benchmark::DoNotOptimize(p.compressor->compress_given(p.acc, "b", first).payload.indices.data());
}

void select(benchmark::State& st, const std::string& method, const std::string& estimate) {
  Parts p(method, estimate);
  double quality = 0.0;
  for (auto _ : st) {
    const Compressed c = p.compressor->compress(p.acc, "b");
    quality = c.info.estimate_quality();
    benchmark::DoNotOptimize(c.payload.indices.data());
  }
  st.counters["estimate_quality"] = quality;
}

void plain(benchmark::State& st, const std::string& method) {
  Parts p(method, "fit");
  for (auto _ : st) {
    auto fresh = make_compressor(method, kDensity, {});
    benchmark::DoNotOptimize(fresh->compress(p.acc, "b").payload.indices.data());
  }
}

void encode_part(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const Compressed c = p.compressor->compress(p.acc, "b");
  for (auto _ : st) benchmark::DoNotOptimize(encode(c.payload).data());
}

void decode_part(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const auto wire = encode(p.compressor->compress(p.acc, "b").payload);
  std::vector<float> out(kN);
  for (auto _ : st) {
    std::vector<Payload> all{decode(wire)};
    p.compressor->aggregate(all, out);
    benchmark::DoNotOptimize(out.data());
  }
}

void commit(benchmark::State& st) {
  Parts p("sidco-e", "carried");
  const Compressed c = p.compressor->compress(p.acc, "b");
  const auto& g = step_gradient(kWarmSteps);
  for (auto _ : st) {
    st.PauseTiming();
    const auto u = p.momentum.advance("b", g);
    p.residual.accumulate("b", u);
    st.ResumeTiming();
    p.residual.commit("b", c.payload, *p.compressor);
    p.momentum.commit("b", c.payload, *p.compressor);
  }
}

void read(benchmark::State& st) {
  const auto& g = step_gradient(0);
  for (auto _ : st) {
    double s = 0.0;
    for (float v : g) s += v;
    benchmark::DoNotOptimize(s);
  }
}

}  // namespace

BENCHMARK(read)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(step, sidco_e_carried, "sidco-e", "carried")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(step, sidco_e_fit, "sidco-e", "fit")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(step, topk, "topk", "carried")->Unit(benchmark::kMicrosecond);
BENCHMARK(momentum)->Unit(benchmark::kMicrosecond);
BENCHMARK(residual)->Unit(benchmark::kMicrosecond);
BENCHMARK(fused)->Unit(benchmark::kMicrosecond);
BENCHMARK(fused_stats)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(select, sidco_e_carried, "sidco-e", "carried")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(select, sidco_e_fit, "sidco-e", "fit")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(select, topk, "topk", "carried")->Unit(benchmark::kMicrosecond);
BENCHMARK(given)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(plain, sidco_e, "sidco-e")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(plain, topk, "topk")->Unit(benchmark::kMicrosecond);
BENCHMARK(encode_part)->Unit(benchmark::kMicrosecond);
BENCHMARK(decode_part)->Unit(benchmark::kMicrosecond);
BENCHMARK(commit)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
