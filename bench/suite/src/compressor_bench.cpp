#include "gs/bench/compressor_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/base/quantile.hpp"
#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"

namespace gs::bench {

using namespace gs::compress;
namespace {

// Heavy-tailed like real gradients: Laplace bulk with a few percent of 10x larger values.
std::vector<float> gradient(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(1000.0f);
  std::bernoulli_distribution sign, big(0.02);
  std::vector<float> g(n);
  for (auto& v : g) v = (sign(rng) ? 1.0f : -1.0f) * e(rng) * (big(rng) ? 10.0f : 1.0f);
  return g;
}

}  // namespace

namespace {

// The workers' gradients and their mean (the exact update), with its norm.
struct Inputs {
  std::vector<std::vector<float>> grads;
  std::vector<double> mean;
  double mean_norm = 0.0;
};

Inputs make_inputs(const CompressorBenchConfig& c) {
  Inputs in;
  const std::size_t w = std::size_t(c.workers);
  for (std::size_t r = 0; r < w; ++r) in.grads.push_back(gradient(c.n, c.seed * 7919 + r));
  in.mean.assign(c.n, 0.0);
  for (const auto& g : in.grads)
    for (std::size_t i = 0; i < c.n; ++i) in.mean[i] += double(g[i]) / double(w);
  for (double v : in.mean) in.mean_norm += v * v;
  in.mean_norm = std::sqrt(in.mean_norm);
  return in;
}

// The read baseline: the median time of a sum over one worker's vector.
double read_ms(const std::vector<float>& g, int repeats) {
  std::vector<double> reads;
  volatile double sink = 0.0;
  for (int k = 0; k < std::max(5, repeats); ++k) {
    const auto t0 = Clock::now();
    double s = 0.0;
    for (float v : g) s += double(v);
    sink = sink + s;
    reads.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(reads);
}

// One compressor at one density: the first step's error, density and bytes, then the median time
// of `repeats` more steps.
CompressorBenchRow measure(const CompressorBenchConfig& c, const Inputs& in, const std::string& name, double density) {
  const std::size_t w = std::size_t(c.workers);
  const std::vector<TensorSpec> model = {{"g", c.n}};
  std::vector<std::unique_ptr<ModelCompressor>> mcs;
  for (std::size_t r = 0; r < w; ++r) {
    CompressorOptions o;
    o.seed = worker_seed(c.seed, r);
    mcs.push_back(std::make_unique<ModelCompressor>(model, Granularity::model, 0, make_compressor(name, density, o)));
  }
  std::vector<std::vector<float>> out(w, std::vector<float>(c.n));
  std::vector<StepStats> stats(w);
  std::vector<double> times;
  CompressorBenchRow row;
  for (int k = 0; k <= c.repeats; ++k) {  // step 0: the error measurement and a warm-up
    // variance: a per-sample variance of (4e-3)^2 per element, so about the largest 2% pass.
    std::vector<float> variance(c.n, 1.6e-5f);
    const auto t0 = Clock::now();
    run_workers(c.workers, [&](Collectives& comm) {
      const auto r = std::size_t(comm.rank());
      if (mcs[r]->compressor().needs_gradient_variance()) mcs[r]->set_gradient_variance(variance);
      mcs[r]->step(in.grads[r], comm, out[r], &stats[r]);
    });
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (k > 0) {
      times.push_back(ms);
      continue;
    }
    double err = 0.0;
    for (std::size_t i = 0; i < c.n; ++i) {
      const double d = double(out[0][i]) - in.mean[i];
      err += d * d;
    }
    row.rel_error = in.mean_norm > 0 ? std::sqrt(err) / in.mean_norm : 0.0;
    row.density = stats[0].density();
    row.wire_bytes = double(stats[0].bytes_sent);
    row.dense_bytes = double(stats[0].dense_bytes);
  }
  row.name = name;
  row.target_density = density;
  row.n = c.n;
  row.workers = c.workers;
  row.median_ms = median(times);
  return row;
}

}  // namespace

std::vector<CompressorBenchRow> run_compressor_bench(const CompressorBenchConfig& c,
                                                     const std::function<void(const CompressorBenchRow&)>& on_row) {
  if (c.n < 1 || c.n > std::uint64_t(INT32_MAX)) throw Error("bench compressors: n must be in [1, 2^31)");
  if (c.workers < 1 || c.workers > 64) throw Error("bench compressors: workers must be in [1, 64]");
  if (c.repeats < 1) throw Error("bench compressors: repeats must be at least 1");
  std::vector<std::string> names = c.names;
  if (names.empty())
    for (auto n : compressor_names()) names.emplace_back(n);
  const Inputs in = make_inputs(c);
  const double baseline = read_ms(in.grads[0], c.repeats);
  std::vector<CompressorBenchRow> rows;
  for (const auto& name : names) {
    // Methods without a density (none, the quantizers, variance: its test decides) run once, at
    // density 1.
    const std::vector<double> densities = density_based(name) ? c.densities : std::vector<double>{1.0};
    for (double density : densities) {
      CompressorBenchRow row = measure(c, in, name, density);
      row.read_ms = baseline;
      if (on_row) on_row(row);
      rows.push_back(row);
    }
  }
  return rows;
}

std::string compressor_bench_table(const std::vector<CompressorBenchRow>& rows) {
  std::ostringstream os;
  char line[240];
  std::snprintf(line, sizeof line, "%-14s %7s %9s %3s %10s %8s %9s %10s %10s\n", "compressor", "ratio", "n", "W",
                "step_ms", "x_read", "density", "vs_dense", "rel_error");
  os << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-14s %7g %9llu %3d %10.3f %8.1f %9.5f %10.5f %10.4f\n", r.name.c_str(),
                  r.target_density, static_cast<unsigned long long>(r.n), r.workers, r.median_ms, r.ratio_to_read(),
                  r.density, r.dense_bytes > 0 ? r.wire_bytes / r.dense_bytes : 0.0, r.rel_error);
    os << line;
  }
  return os.str();
}

std::string compressor_bench_json(const std::vector<CompressorBenchRow>& rows) {
  std::ostringstream os;
  os.precision(6);
  os << "{\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    os << (i ? "," : "") << "{\"compressor\":\"" << r.name << "\",\"ratio\":" << r.target_density << ",\"n\":" << r.n
       << ",\"workers\":" << r.workers << ",\"median_ms\":" << r.median_ms << ",\"read_ms\":" << r.read_ms
       << ",\"ratio_to_read\":" << r.ratio_to_read() << ",\"density\":" << r.density
       << ",\"wire_bytes\":" << r.wire_bytes << ",\"dense_bytes\":" << r.dense_bytes << ",\"rel_error\":" << r.rel_error
       << "}";
  }
  os << "]}";
  return os.str();
}

}  // namespace gs::bench
