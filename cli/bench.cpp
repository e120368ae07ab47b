// gradscope bench kernels: times every heavy pass of the kernels backend against one plain read
// pass over the same vector; gradscope bench compressors: one training step of every compressor
// on in-process workers (see docs/BENCHMARKS.md for the recorded figures).
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gs/base/error.hpp"

#include "command.hpp"
#include "vector_input.hpp"
#include "gs/bench/compressor_bench.hpp"
#include "gs/bench/kernels_bench.hpp"

namespace {

struct BenchCliConfig {
  gs::bench::KernelBenchConfig kernels;
  gs::bench::CompressorBenchConfig compressors;
  double compressor_n = double(1u << 20);
  bool run_compressors = false;  // `bench compressors` was chosen
  std::string backend = "cpu";
  std::vector<double> sizes{1e6, 1e7, 1e8};  // doubles so that 1e7 parses
  gs::cli::VectorInput input;                // --input: the user's vector instead of Laplace data
  bool json = false;
  bool quiet = false;
};

GS_COMMAND(
    "bench", "Benchmarks: `bench kernels` (heavy passes), `bench compressors` (one training step)", 60,
    [](CLI::App& sub) -> gs::cli::Runner {
      auto cfg = std::make_shared<BenchCliConfig>();
      sub.require_subcommand(1);
      CLI::App* c = sub.add_subcommand("compressors",
                                       "Every compressor: step time vs a read pass, bytes vs dense, error of the mean");
      c->add_option("--n", cfg->compressor_n, "Elements per worker's vector (default 2^20)");
      c->add_option("--ratios", cfg->compressors.densities, "Densities (default 0.01,0.001)")->delimiter(',');
      c->add_option("--compressors", cfg->compressors.names, "Names (default: all)")->delimiter(',');
      c->add_option("--workers", cfg->compressors.workers, "In-process workers (threads)")->capture_default_str();
      c->add_option("--repeats", cfg->compressors.repeats, "Timed steps per row")->capture_default_str();
      c->add_flag("--json", cfg->json, "One JSON object on stdout");
      c->add_flag("--quiet", cfg->quiet, "No progress lines");
      c->callback([cfg] { cfg->run_compressors = true; });
      CLI::App* k = sub.add_subcommand("kernels", "Stats, compaction, SIDCo-E and exact top-k vs a read pass");
      k->add_option("--sizes", cfg->sizes, "Vector lengths (default 1e6,1e7,1e8)")->delimiter(',');
      k->add_option("--input", cfg->input.path,
                    "Run on this vector instead of Laplace data: a .npy, or a snapshot (.h5) "
                    "with --step and --layer or --whole-model");
      cfg->input.add_options(*k);
      k->add_option("--densities", cfg->kernels.densities, "Target densities (default 0.1,0.01,0.001)")->delimiter(',');
      k->add_option("--backend", cfg->backend, "auto, cpu or cuda")->capture_default_str();
      k->add_option("--repeats", cfg->kernels.repeats, "Timed repeats per figure (0: by size)");
      k->add_option("--stages", cfg->kernels.sidco_stage_counts, "SIDCo-E stage counts to time, e.g. 1,2,3 (default 2)")
          ->delimiter(',');
      k->add_flag("--json", cfg->json, "One JSON object on stdout");
      k->add_flag("--quiet", cfg->quiet, "No progress lines");
      return [cfg]() {
        if (cfg->run_compressors) {
          if (!(cfg->compressor_n >= 1)) throw gs::Error("--n must be at least 1");
          cfg->compressors.n = static_cast<std::uint64_t>(cfg->compressor_n);
          const bool show = !cfg->quiet;
          const auto rows = gs::bench::run_compressor_bench(cfg->compressors, [show](const auto& r) {
            if (show)
              std::fprintf(stderr, "bench: %s ratio=%g: %.3f ms\n", r.name.c_str(), r.target_density, r.median_ms);
          });
          const std::string out =
              cfg->json ? gs::bench::compressor_bench_json(rows) : gs::bench::compressor_bench_table(rows);
          std::puts(out.c_str());
          return 0;
        }
        cfg->kernels.sizes.clear();
        for (double n : cfg->sizes) cfg->kernels.sizes.push_back(static_cast<std::uint64_t>(n));
        if (!cfg->input.path.empty()) {
          gs::cli::LoadedVector in = gs::cli::load_vector(cfg->input);
          cfg->kernels.input = std::move(in.values);
          cfg->kernels.input_name = in.source;
        }
        cfg->kernels.backend = gs::kernels::resolve_backend(cfg->backend);
        const bool show = !cfg->quiet;
        const auto rows = gs::bench::run_kernels_bench(cfg->kernels, [show](const auto& r) {
          if (show)
            std::fprintf(stderr, "bench: %s n=%llu density=%g: %.3f ms\n", r.method.c_str(),
                         static_cast<unsigned long long>(r.n), r.density, r.median_ms);
        });
        const std::string out =
            cfg->json ? gs::bench::kernels_bench_json(cfg->kernels, rows) : gs::bench::kernels_bench_table(rows);
        std::puts(out.c_str());
        return 0;
      };
    });

}  // namespace
