// gradscope train: compressed data-parallel training of a Fashion-MNIST model on one or several
// workers (c10d Gloo). --workers W starts W processes here; --rank/--master-* place one worker of a
// group started by hand (one per machine). Rank 0 prints; --json prints one object at the end.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app.hpp"
#include "torch_commands.hpp"
#include "table_flags.hpp"
#include "gs/base/bytes.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/base/error.hpp"
#include "gs/distributed/checkpoint.hpp"
#include "gs/distributed/config.hpp"
#include "gs/distributed/launcher.hpp"
#include "gs/distributed/trainer.hpp"

namespace {

int run(const gs::distributed::TrainConfig& cfg) {
  cfg.validate();
  // Name, ratio and option errors up front, before any worker starts.
  const auto probe = gs::compress::make_compressor(cfg.compressor, cfg.run_density(), cfg.compressor_options(0));
  if (cfg.momentum_correction && !gs::compress::supports_momentum_correction(*probe))
    throw gs::Error("--momentum-correction masks what a sparse compressor sends; '" + cfg.compressor +
                    "' is not one: drop the flag (its momentum stays in the optimizer)");
  // The checkpoint directories, checked once where the run starts (a launched worker's launcher did):
  // a checkpoint to resume from in one line if it does not fit, old checkpoints never mixed in.
  if (!std::getenv(gs::distributed::kStoreHostedEnv)) {
    // A worker placed by hand (--rank) may see only its own files: it checks those.
    if (!cfg.resume.empty()) {
      gs::distributed::verify_rank_files(gs::distributed::matching_checkpoint(cfg.resume, cfg), cfg.rank);
    } else {
      gs::distributed::prepare_checkpoint_root(cfg);
    }
  }
  if (cfg.workers > 1 && cfg.rank < 0) {
    // Each worker runs this command line's worker form in a fork of this process (libtorch loaded
    // once), as `gradscope train --rank R ...` would in a process of its own.
    return gs::distributed::launch_workers(cfg, [](const std::vector<std::string>& args) {
      const std::string program = gs::cli::invocation().empty() ? "gradscope" : gs::cli::invocation()[0];
      std::vector<const char*> argv = {program.c_str()};
      for (const auto& a : args) argv.push_back(a.c_str());
      return gs::cli::run(int(argv.size()), argv.data());
    });
  }
  const bool print_steps = !cfg.quiet && !cfg.json;
  auto on_step = [&](const gs::distributed::StepReport& rep, std::int64_t total) {
    if (!print_steps) return;
    const gs::compress::StepStats& s = rep.stats;
    if (s.skipped) {
      std::fprintf(stderr, "step %lld/%lld skipped: non-finite gradient on some worker\n", (long long)rep.step + 1,
                   (long long)total);
      return;
    }
    std::fprintf(stderr,
                 "step %lld/%lld loss %.4f density %.3g quality %.3f%s%s sent %s of %s compress "
                 "%.2f ms comm %.2f ms\n",
                 (long long)rep.step + 1, (long long)total, rep.loss, s.density(), s.quality(),
                 s.stages ? (" stages " + std::to_string(s.stages)).c_str() : "", s.critical ? " critical" : "",
                 gs::human_bytes(double(s.bytes_sent)).c_str(), gs::human_bytes(double(s.dense_bytes)).c_str(),
                 s.compress_seconds * 1e3, s.comm_seconds * 1e3);
  };
  const auto r = gs::distributed::train_worker(cfg, on_step);
  if (cfg.rank > 0) return 0;
  if (cfg.json) {
    std::cout << gs::distributed::to_json(cfg, r) << "\n";
    return 0;
  }
  const auto s = gs::distributed::summarize(r);
  std::printf("model %s, compressor %s at ratio %g, %d worker(s), %zu steps (%lld skipped)\n", cfg.model.c_str(),
              cfg.compressor.c_str(), cfg.run_density(), cfg.workers, r.steps.size(), (long long)r.skipped_steps);
  std::printf("test accuracy %.2f%%, final loss %.4f, wall time %.1f s\n", 100.0 * r.test_accuracy, r.final_loss,
              r.wall_seconds);
  std::printf("density %.4g, quality mean %.3f (p5 %.3f, p95 %.3f)\n", s.density_mean, s.quality_mean, s.quality_p5,
              s.quality_p95);
  std::printf(
      "sent per worker per step %s of %s dense; compress %.2f ms, communicate %.2f ms, "
      "step %.1f ms\n",
      gs::human_bytes(s.bytes_per_step).c_str(), gs::human_bytes(s.dense_bytes_per_step).c_str(),
      s.compress_ms_per_step, s.comm_ms_per_step, s.step_ms);
  if (cfg.workers > 1) std::printf("replicas agree: %s\n", r.replica_max_diff == 0.0 ? "yes" : "NO");
  if (r.resumed_from > 0) std::printf("resumed after step %lld\n", (long long)r.resumed_from);
  std::printf("parameters SHA-256 %s\n", r.param_digest.c_str());
  return 0;
}

// Every flag comes from the option table (gs::distributed::train_options()): its text is parsed by the
// table, its range checked by TrainConfig::validate() when the command runs.
gs::cli::Runner setup(CLI::App& sub) {
  auto cfg = std::make_shared<gs::distributed::TrainConfig>();
  gs::cli::add_table_flags(sub, gs::distributed::train_options(), cfg);
  return [cfg] { return run(*cfg); };
}

}  // namespace

GS_TORCH_COMMAND("train", setup);
