// gs_kernels_bench: the kernel benchmarks without the CLI (for a GPU machine that builds only
// fitting/kernels). Usage: gs_kernels_bench [--backend cpu|cuda|auto] [--sizes 1e6,1e7]
// [--densities 0.1,0.01] [--stages 1,2,3] [--repeats R] [--json]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gs/base/error.hpp"
#include "gs/base/join.hpp"
#include "gs/bench/kernels_bench.hpp"

namespace {
template <class T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> out;
  for (std::string_view text : gs::split_list(s)) {
    const std::string item(text);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0') throw gs::Error("not a number list: '" + s + "'");
    out.push_back(static_cast<T>(v));
  }
  if (out.empty()) throw gs::Error("not a number list: '" + s + "'");
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    gs::bench::KernelBenchConfig config;
    bool json = false;
    std::string backend = "auto";
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw gs::Error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--json")
        json = true;
      else if (a == "--backend")
        backend = next();
      else if (a == "--sizes")
        config.sizes = parse_list<std::uint64_t>(next());
      else if (a == "--densities")
        config.densities = parse_list<double>(next());
      else if (a == "--stages")
        config.sidco_stage_counts = parse_list<int>(next());
      else if (a == "--repeats")
        config.repeats = std::stoi(next());
      else
        throw gs::Error("unknown argument '" + a + "' (see the usage at the top of the source)");
    }
    config.backend = gs::kernels::resolve_backend(backend);
    // Each row on stderr as it is measured, JSON or not: a run that dies midway still says what
    // it measured (scripts/gpu_bench.py reads these lines then).
    const auto rows = gs::bench::run_kernels_bench(config, [](const auto& r) {
      std::fprintf(stderr, "%s n=%llu d=%g: %.3f ms\n", r.method.c_str(), static_cast<unsigned long long>(r.n),
                   r.density, r.median_ms);
    });
    std::puts(json ? gs::bench::kernels_bench_json(config, rows).c_str()
                   : gs::bench::kernels_bench_table(rows).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gs_kernels_bench: error: %s\n", e.what());
    return 1;
  }
}
