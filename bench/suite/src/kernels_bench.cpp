// Kernel benchmarks (see gs/kernels/bench.hpp). Every call below returns only after its work is
// done (the CUDA entry points synchronize), so a host clock around each call times it.
#include "gs/bench/kernels_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::bench {

using namespace gs::kernels;
namespace {

using Clock = std::chrono::steady_clock;

// What the last timed call queued on the device (the row emitted next takes it).
thread_local DeviceWork last_call_work;

template <class F>
std::pair<double, double> time_ms(int repeats, F&& f) {
  std::vector<double> t;
  f();  // warm-up: first-touch pages, pool allocations, module load
  for (int r = 0; r < repeats; ++r) {
    const DeviceWork w0 = device_work();
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    last_call_work = device_work() - w0;
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

std::vector<float> laplace_data(std::uint64_t n, std::uint64_t seed) {
  std::vector<float> g(n);
  const std::size_t chunks = (n + cpu::kChunk - 1) / cpu::kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks); ++c) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(c));  // per chunk: same data any thread count
    std::exponential_distribution<float> expo(1000.0f);
    const std::size_t end = std::min<std::size_t>(n, (c + 1) * cpu::kChunk);
    for (std::size_t i = static_cast<std::size_t>(c) * cpu::kChunk; i < end; ++i)
      g[i] = (rng() & 1) ? expo(rng) : -expo(rng);
  }
  return g;
}

// The operations timed, over one vector, for one backend.
struct Ops {
  std::function<double()> read;
  std::function<fitting::MagnitudeStats()> stats;
  std::function<std::uint64_t(double)> count_above;
  std::function<std::uint64_t(double)> compact;  // into preallocated buffers of n
  std::function<void(std::uint64_t)> topk;
  // sidco-topk at a density, its selection copied to the host (as a compressor gets it)
  std::function<SidcoSelectResult(double, Selection<std::int32_t>&)> sidco_topk;
  std::unique_ptr<fitting::MagnitudePasses> passes;
  // Device backends: a selection made and left on the device (Selector::select, every decision
  // taken there, nothing read back), timed until the device is done with it; and that selection's
  // report, fetched afterwards (untimed).
  std::function<void(const SelectRequest&)> resident;
  std::function<SelectionReport()> resident_report;
  int topk_passes = 2;
  std::vector<std::shared_ptr<void>> keep;  // device buffers the operations read
};

// A string as a JSON string's contents.
std::string json_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

void validate(const KernelBenchConfig& c) {
  if (!c.input.empty()) {
    if (c.input.size() < 1000)
      throw gs::Error("bench: the input holds " + std::to_string(c.input.size()) +
                      " values; give a vector of at least 1000");
  } else {
    if (c.sizes.empty()) throw gs::Error("bench: give at least one size");
    for (auto n : c.sizes)
      if (n < 1000) throw gs::Error("bench: sizes must be at least 1000 (got " + std::to_string(n) + ")");
  }
  for (double d : c.densities)
    if (!(d > 0.0 && d < 1.0)) throw gs::Error("bench: densities must lie in (0, 1)");
  if (c.repeats < 0) throw gs::Error("bench: repeats must be >= 0");
  if (c.sidco_stages < 1) throw gs::Error("bench: SIDCo stages must be >= 1");
  for (int m : c.sidco_stage_counts)
    if (m < 1) throw gs::Error("bench: SIDCo stages must be >= 1 (got " + std::to_string(m) + ")");
}

namespace {

// The operations on the host vector g, into idx and val (n each).
void cpu_ops(const std::vector<float>& g, std::vector<std::int32_t>& idx, std::vector<float>& val, Ops& ops) {
  idx.resize(g.size());
  val.resize(g.size());
  const std::span<const float> s(g);
  ops.read = [s] { return cpu::sum(s); };
  ops.stats = [s] { return cpu::stats(s); };
  ops.count_above = [s](double t) { return cpu::count_above(s, t); };
  ops.compact = [s, &idx, &val](double t) { return cpu::compact_above(s, t, std::span(idx), std::span(val)); };
  ops.topk = [s, &idx, &val](std::uint64_t k) { cpu::topk(s, k, std::span(idx).first(k), std::span(val).first(k)); };
  ops.passes = make_passes(s, BackendKind::cpu);
  ops.sidco_topk = [s, ws = std::make_shared<cpu::SidcoWorkspace>()](double d, Selection<std::int32_t>& out) {
    return cpu::sidco_topk(s, d, 2, out, ws.get());
  };
}

// The operations on a device copy of g (the buffers kept alive by ops.keep).
void device_ops(const std::vector<float>& g, Ops& ops) {
#if defined(GS_HAVE_CUDA)
  const std::uint64_t n = g.size();
  auto d_g = std::make_shared<cuda::DeviceBuffer<float>>(n, nullptr);
  d_g->upload(g);
  auto d_idx = std::make_shared<cuda::DeviceBuffer<std::int32_t>>(n, nullptr);
  auto d_val = std::make_shared<cuda::DeviceBuffer<float>>(n, nullptr);
  const float* p = d_g->data();
  std::int32_t* pi = d_idx->data();
  float* pv = d_val->data();
  ops.keep = {d_g, d_idx, d_val};
  ops.read = [p, n] { return cuda::sum(p, n, nullptr); };
  ops.stats = [p, n] { return cuda::stats(p, n, nullptr); };
  ops.count_above = [p, n](double t) { return cuda::count_above(p, n, t, nullptr); };
  ops.compact = [p, n, pi, pv](double t) { return cuda::compact_above(p, n, t, pi, pv, n, nullptr); };
  ops.topk = [p, n, pi, pv](std::uint64_t k) { cuda::topk(p, n, k, pi, pv, nullptr); };
  ops.passes = cuda::make_device_passes(p, n, nullptr);
  ops.sidco_topk = [p, n](double d, Selection<std::int32_t>& out) {
    return cuda::sidco_topk(p, n, d, 2, out, nullptr);
  };
  ops.topk_passes = 5;  // the finite count, three digits, the selection
  std::shared_ptr<Selector> selector = make_selector(BackendKind::cuda, nullptr);
  ops.resident = [selector, p, n](const SelectRequest& r) {
    selector->select(p, n, r);
    cuda::synchronize(nullptr);  // the legacy stream, ordered after the selection's work
  };
  ops.resident_report = [selector] {
    Selection<std::int32_t> out;
    return selector->fetch(out);
  };
#else
  (void)g;
  (void)ops;
  throw gs::Error("bench: this build has no CUDA backend");
#endif
}

// The same operations on the cuda-host backend: the CUDA backend's code on the host, run once to
// count what each call queues (its times are the host's, not a GPU's: the rows give the ledger and
// the cost model's time), on the grid of the model's device.
void cuda_host_ops(const std::vector<float>& g, Ops& ops) {
  cuda_host::set_multiprocessors(kernels::kModelMultiprocessors);
  const std::uint64_t n = g.size();
  auto buffers = std::make_shared<std::pair<std::vector<std::int32_t>, std::vector<float>>>(n, n);
  const float* p = g.data();
  std::int32_t* pi = buffers->first.data();
  float* pv = buffers->second.data();
  ops.keep = {buffers};
  ops.read = [p, n] { return cuda_host::sum(p, n); };
  ops.stats = [p, n] { return cuda_host::stats(p, n); };
  ops.count_above = [p, n](double t) { return cuda_host::count_above(p, n, t); };
  ops.compact = [p, n, pi, pv](double t) { return cuda_host::compact_above(p, n, t, pi, pv, n); };
  ops.topk = [p, n, pi, pv](std::uint64_t k) { cuda_host::topk(p, n, k, pi, pv); };
  ops.passes = cuda_host::make_passes(p, n);
  ops.sidco_topk = [p, n](double d, Selection<std::int32_t>& out) { return cuda_host::sidco_topk(p, n, d, 2, out); };
  ops.topk_passes = 5;  // the finite count, three digits, the selection
  std::shared_ptr<Selector> selector = cuda_host::make_selector();
  ops.resident = [selector, p, n](const SelectRequest& r) { selector->select(p, n, r); };
  ops.resident_report = [selector] {
    Selection<std::int32_t> out;
    return selector->fetch(out);
  };
}

using Emit = std::function<void(KernelBenchRow)>;

// The passes with no density: read (the baseline), stats, stats_light, a tail stage's pass.
double time_passes(Ops& ops, std::uint64_t n, int repeats, const Emit& emit) {
  const auto [read_ms, read_min] = time_ms(repeats, [&] { ops.read(); });
  emit({"read", n, 0.0, 1, read_ms, read_min, read_ms, 0});
  const auto [st_ms, st_min] = time_ms(repeats, [&] { ops.stats(); });
  emit({"stats", n, 0.0, 1, st_ms, st_min, read_ms, 0});
  const auto [sl_ms, sl_min] = time_ms(repeats, [&] { ops.passes->stats_light(fitting::StatsFields{}); });
  emit({"stats_light", n, 0.0, 1, sl_ms, sl_min, read_ms, 0});
  // A tail stage's pass: statistics of the top quarter (SIDCo's stage-1 density).
  const double q = ops.passes->kth_largest(std::max<std::uint64_t>(1, n / 4));
  fitting::MagnitudeStats y;
  const auto [sa_ms, sa_min] =
      time_ms(repeats, [&] { y = ops.passes->stats_above_light(q, q, fitting::StatsFields{}); });
  emit({"stats_above_light", n, 0.25, 1, sa_ms, sa_min, read_ms, y.count});
  return read_ms;
}

// A row of a resident selection timed as `t`: its count, and the full reads of g its decisions
// launched (`reads`, from the report of its last run).
void emit_resident(const char* method, Ops& ops, std::uint64_t n, double delta, std::pair<double, double> t,
                   double read_ms, int m, const std::function<int(const SelectionReport&)>& reads, const Emit& emit) {
  const SelectionReport rep = ops.resident_report();
  emit({method, n, delta, reads(rep), t.first, t.second, read_ms, rep.count, m});
}

// SIDCo-E with M stages at delta: the threshold alone, and with its selection (on the CPU by each
// route, on the device by a compaction after the threshold).
void time_sidco(const KernelBenchConfig& config, Ops& ops, const std::vector<float>& g, double delta, int m,
                int repeats, double read_ms, std::vector<std::int32_t>& idx, std::vector<float>& val,
                cpu::SidcoWorkspace& workspace, const Emit& emit) {
  const std::uint64_t n = g.size();
  // The threshold alone (fitting's sidco_estimate: M light passes, no count).
  auto t = time_ms(repeats,
                   [&] { gs::fitting::sidco_estimate(*ops.passes, delta, gs::fitting::SidcoVariant::exponential, m); });
  emit({"sidco-e", n, delta, m, t.first, t.second, read_ms, 0, m});
  if (config.backend != BackendKind::cpu) {
    // Threshold on the device passes, then the device compaction: M + 1 reads.
    std::uint64_t sel = 0;
    t = time_ms(repeats, [&] {
      const auto r = gs::fitting::sidco_estimate(*ops.passes, delta, gs::fitting::SidcoVariant::exponential, m);
      sel = ops.compact(r.threshold);
    });
    emit({"sidco-e+compact:full", n, delta, m + 1, t.first, t.second, read_ms, sel, m});
    // The resident selection, as the compressors and the DDP hook run it (count correction on).
    SelectRequest r;
    r.rule = SelectRequest::Rule::sidco;
    r.density = delta;
    r.variant = fitting::SidcoVariant::exponential;
    r.stages = m;
    t = time_ms(repeats, [&] { ops.resident(r); });
    emit_resident(
        "sidco-e:resident", ops, n, delta, t, read_ms, m,
        [&](const SelectionReport& rep) { return sidco_resident_reads(rep, r.sidco.correct); }, emit);
    return;
  }
  const std::span<const float> s(g);
  for (const auto route : {cpu::SidcoRoute::full_passes, cpu::SidcoRoute::candidates, cpu::SidcoRoute::predicted}) {
    cpu::SidcoSelectResult r;
    t = time_ms(repeats, [&] {
      r = cpu::sidco_select(s, delta, gs::fitting::SidcoVariant::exponential, m, gs::fitting::SidcoRule::published(),
                            std::span(idx), std::span(val), route, &workspace);
    });
    const char* label = r.route == cpu::SidcoRoute::candidates  ? "sidco-e+compact:candidates"
                        : r.route == cpu::SidcoRoute::predicted ? "sidco-e+compact:predicted"
                                                                : "sidco-e+compact:full";
    emit({label, n, delta, r.full_reads, t.first, t.second, read_ms, r.selected, m});
  }
  // With the count correction (what the compressors and select() run): the automatic route, and at
  // most one more read when the selection lands outside [0.8, 1.25] of the target.
  cpu::SidcoSelectResult r;
  t = time_ms(repeats, [&] {
    r = cpu::sidco_select(s, delta, gs::fitting::SidcoVariant::exponential, m, gs::fitting::SidcoRule{}, std::span(idx),
                          std::span(val), cpu::SidcoRoute::automatic, &workspace);
  });
  emit({r.corrected ? "sidco-e+compact:corrected" : "sidco-e+compact:in-band", n, delta, r.full_reads, t.first,
        t.second, read_ms, r.selected, m});
}

// Every method at one density: count, compaction, SIDCo-E, sidco-topk, top-k (and the common
// exact top-k by nth_element on the CPU).
void time_density(const KernelBenchConfig& config, Ops& ops, const std::vector<float>& g, double delta, int repeats,
                  double read_ms, std::vector<std::int32_t>& idx, std::vector<float>& val,
                  cpu::SidcoWorkspace& workspace, const Emit& emit) {
  const std::uint64_t n = g.size();
  const std::uint64_t k = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::floor(double(n) * delta)));
  const double kth = ops.passes->kth_largest(k);
  std::uint64_t sel = 0;
  auto t = time_ms(repeats, [&] { sel = ops.count_above(kth); });
  emit({"count_above", n, delta, 1, t.first, t.second, read_ms, sel});
  t = time_ms(repeats, [&] { sel = ops.compact(kth); });
  emit({"compact", n, delta, 1, t.first, t.second, read_ms, sel});
  std::vector<int> stage_counts = config.sidco_stage_counts;
  if (stage_counts.empty()) stage_counts.push_back(config.sidco_stages);
  for (const int m : stage_counts) time_sidco(config, ops, g, delta, m, repeats, read_ms, idx, val, workspace, emit);
  {
    // Exact top-k with a SIDCo bound: reads of g (1, or more after a fallback), M its stages.
    Selection<std::int32_t> picked;
    SidcoSelectResult r;
    t = time_ms(repeats, [&] { r = ops.sidco_topk(delta, picked); });
    emit({"sidco-topk", n, delta, r.full_reads, t.first, t.second, read_ms, r.selected, r.stages});
  }
  t = time_ms(repeats, [&] { ops.topk(k); });
  emit({"topk", n, delta, ops.topk_passes, t.first, t.second, read_ms, k});
  if (ops.resident) {
    SelectRequest r;
    r.rule = SelectRequest::Rule::topk;
    r.k = k;
    t = time_ms(repeats, [&] { ops.resident(r); });
    emit_resident(
        "topk:resident", ops, n, delta, t, read_ms, 0, [](const SelectionReport&) { return 1 + kRadixTopkReads; },
        emit);  // the finite count first
    // sidco-topk as the compressors run it: the candidates above the sample's bound (the finite
    // count in the same read), and g's own exact top-k where the bound did not hold.
    r.rule = SelectRequest::Rule::sidco_topk;
    r.density = delta;
    r.stages = 2;
    t = time_ms(repeats, [&] { ops.resident(r); });
    emit_resident(
        "sidco-topk:resident", ops, n, delta, t, read_ms, 2,
        [](const SelectionReport& rep) { return 1 + (rep.corrected ? kRadixTopkReads : 0); }, emit);
  }
  if (config.baselines && config.backend == BackendKind::cpu) {
    // The common exact top-k: magnitudes copied, nth_element, then a compaction at the k-th.
    std::vector<float> mag(n);
    t = time_ms(std::max(3, repeats / 3), [&] {
      std::transform(g.begin(), g.end(), mag.begin(), [](float v) { return std::fabs(v); });
      std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<>());
      sel = ops.compact(std::nextafter(mag[k - 1], 0.0f));
    });
    emit({"topk-nth_element", n, delta, 3, t.first, t.second, read_ms, sel});
  }
}

}  // namespace

std::vector<KernelBenchRow> run_kernels_bench(const KernelBenchConfig& config,
                                              const std::function<void(const KernelBenchRow&)>& progress) {
  validate(config);
  if (config.backend == BackendKind::cuda && !cuda_available()) resolve_backend("cuda");  // throws why
  const bool ledger_only = config.backend == BackendKind::cuda_host;                      // counted, not timed
  std::vector<KernelBenchRow> rows;
  const Emit emit = [&](KernelBenchRow r) {
    if (config.backend != BackendKind::cpu) {
      r.launches = last_call_work.launches;
      r.vector_passes = double(last_call_work.elements_passed) / double(r.n);
      r.model_ms = kernels::modelled_ms(last_call_work.launches, double(last_call_work.elements_passed));
    }
    if (ledger_only) r.median_ms = r.min_ms = r.read_ms = std::nan("");
    rows.push_back(r);
    if (progress) progress(r);
  };
  const std::vector<std::uint64_t> sizes =
      config.input.empty() ? config.sizes : std::vector<std::uint64_t>{config.input.size()};
  for (const std::uint64_t n : sizes) {
    std::vector<float> generated;
    const std::vector<float>& g = config.input.empty() ? (generated = laplace_data(n, config.seed)) : config.input;
    const int repeats = ledger_only          ? 1
                        : config.repeats > 0 ? config.repeats
                                             : static_cast<int>(std::clamp<std::uint64_t>(300'000'000 / n, 5, 31));
    Ops ops;
    std::vector<std::int32_t> idx;
    std::vector<float> val;
    if (config.backend == BackendKind::cpu)
      cpu_ops(g, idx, val, ops);
    else if (ledger_only)
      cuda_host_ops(g, ops);
    else
      device_ops(g, ops);
    const double read_ms = time_passes(ops, n, repeats, emit);
    cpu::SidcoWorkspace workspace;
    for (const double delta : config.densities)
      time_density(config, ops, g, delta, repeats, read_ms, idx, val, workspace, emit);
  }
  return rows;
}

std::string kernels_bench_json(const KernelBenchConfig& config, const std::vector<KernelBenchRow>& rows) {
  std::ostringstream os;
  os.precision(6);
  os << "{\"backend\":\"" << to_string(config.backend) << "\",\"threads\":" << cpu::threads() << ",\"input\":\""
     << (config.input.empty() ? "laplace" : json_text(config.input_name)) << "\""
     << ",\"cpu\":\"" << cpu_model() << "\",\"sidco_stages\":" << config.sidco_stages << ",\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    os << (i ? "," : "") << "{\"method\":\"" << r.method << "\",\"n\":" << r.n << ",\"density\":" << r.density
       << ",\"passes\":" << r.passes << ",\"median_ms\":" << r.median_ms << ",\"min_ms\":" << r.min_ms
       << ",\"read_ms\":" << r.read_ms << ",\"ratio_to_read\":" << r.ratio() << ",\"selected\":" << r.selected
       << ",\"stages\":" << r.stages << ",\"launches\":" << r.launches << ",\"vector_passes\":" << r.vector_passes
       << ",\"model_ms\":" << r.model_ms << "}";
  }
  os << "]}";
  return os.str();
}

std::string kernels_bench_table(const std::vector<KernelBenchRow>& rows) {
  std::ostringstream os;
  char line[200];
  const bool device = !rows.empty() && (rows.front().launches > 0);
  std::snprintf(line, sizeof line, "%-27s %2s %11s %8s %6s %11s %9s %11s%s\n", "method", "M", "n", "density", "passes",
                "median_ms", "x_read", "selected", device ? "  launches  g_passes  model_ms" : "");
  os << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-27s %2s %11llu %8g %6d %11.3f %9.2f %11llu", r.method.c_str(),
                  r.stages ? std::to_string(r.stages).c_str() : "", static_cast<unsigned long long>(r.n), r.density,
                  r.passes, r.median_ms, r.ratio(), static_cast<unsigned long long>(r.selected));
    os << line;
    if (device) {
      std::snprintf(line, sizeof line, "  %8llu %9.2f %9.3f", static_cast<unsigned long long>(r.launches),
                    r.vector_passes, r.model_ms);
      os << line;
    }
    os << '\n';
  }
  return os.str();
}

}  // namespace gs::bench
