// gradscope train: compressed data-parallel training of a Fashion-MNIST model on one or several
// workers (c10d Gloo). --workers W starts W processes here; --rank/--master-* place one worker of a
// group started by hand (one per machine). Rank 0 prints; --json prints one object at the end.
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "gs/base/bytes.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/error.hpp"
#include "gs/dist/config.hpp"
#include "gs/dist/launcher.hpp"
#include "gs/dist/trainer.hpp"

namespace {

int run(const gs::dist::TrainConfig& cfg) {
  cfg.validate();
  // Name, ratio and option errors up front, before any worker starts.
  const auto probe = gs::compress::make_compressor(cfg.compressor, cfg.ratio, cfg.compressor_options(0));
  if (cfg.momentum_correction && !gs::compress::supports_momentum_correction(*probe))
    throw gs::Error("--momentum-correction masks what a sparse compressor sends; '" + cfg.compressor +
                    "' is not one: drop the flag (its momentum stays in the optimizer)");
  if (cfg.workers > 1 && cfg.rank < 0) return gs::dist::launch_workers(cfg);
  const bool print_steps = !cfg.quiet && !cfg.json;
  auto on_step = [&](const gs::dist::StepReport& s, std::int64_t total) {
    if (!print_steps) return;
    if (s.skipped) {
      std::fprintf(stderr, "step %lld/%lld skipped: non-finite gradient on some worker\n",
                   (long long)s.step + 1, (long long)total);
      return;
    }
    std::fprintf(stderr,
                 "step %lld/%lld loss %.4f density %.3g quality %.3f%s sent %s of %s compress "
                 "%.2f ms comm %.2f ms\n",
                 (long long)s.step + 1, (long long)total, s.loss, s.density, s.quality,
                 s.stages ? (" stages " + std::to_string(s.stages)).c_str() : "",
                 gs::human_bytes(double(s.bytes_sent)).c_str(), gs::human_bytes(double(s.dense_bytes)).c_str(),
                 s.compress_seconds * 1e3, s.comm_seconds * 1e3);
  };
  const auto r = gs::dist::train_worker(cfg, on_step);
  if (cfg.rank > 0) return 0;
  if (cfg.json) {
    std::cout << gs::dist::to_json(cfg, r) << "\n";
    return 0;
  }
  const auto s = gs::dist::summarize(r);
  std::printf("model %s, compressor %s at ratio %g, %d worker(s), %zu steps (%lld skipped)\n",
              cfg.model.c_str(), cfg.compressor.c_str(), cfg.ratio, cfg.workers, r.steps.size(),
              (long long)r.skipped_steps);
  std::printf("test accuracy %.2f%%, final loss %.4f, wall time %.1f s\n", 100.0 * r.test_accuracy,
              r.final_loss, r.wall_seconds);
  std::printf("density %.4g, quality mean %.3f (p5 %.3f, p95 %.3f)\n", s.density_mean,
              s.quality_mean, s.quality_p5, s.quality_p95);
  std::printf("sent per worker per step %s of %s dense; compress %.2f ms, communicate %.2f ms, "
              "step %.1f ms\n",
              gs::human_bytes(s.bytes_per_step).c_str(), gs::human_bytes(s.dense_bytes_per_step).c_str(),
              s.compress_ms_per_step, s.comm_ms_per_step, s.step_ms);
  if (cfg.workers > 1) std::printf("replicas agree: %s\n", r.replica_max_diff == 0.0 ? "yes" : "NO");
  return 0;
}

gs::cli::Runner setup(CLI::App& sub) {
  auto cfg = std::make_shared<gs::dist::TrainConfig>();
  std::string names;
  for (auto n : gs::compress::compressor_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  sub.add_option("--model", cfg->model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn", "lstm"}));
  sub.add_option("--compressor", cfg->compressor, names);
  sub.add_option("--ratio", cfg->ratio, "target density: fraction of elements sent, in (0, 1]");
  sub.add_option("--workers", cfg->workers, "worker processes (world size)");
  sub.add_option("--steps", cfg->steps, "stop after this many steps (0: run the epochs)");
  sub.add_option("--epochs", cfg->epochs, "passes over each worker's shard");
  sub.add_option("--granularity", cfg->granularity, "layer, model or bucket")
      ->check(CLI::IsMember({"layer", "model", "bucket"}));
  sub.add_option("--bucket-size", cfg->bucket_size, "elements per bucket (--granularity bucket)");
  sub.add_option("--batch", cfg->batch, "examples per worker per step");
  sub.add_option("--lr", cfg->lr, "SGD learning rate (of the first step)");
  sub.add_option("--lr-schedule", cfg->lr_schedule,
                 "constant; cosine: decays from --lr to 0 over the run's steps; step: --lr / 10 "
                 "over the last tenth of the steps")
      ->check(CLI::IsMember({"constant", "cosine", "step"}));
  sub.add_option("--momentum", cfg->momentum, "SGD momentum");
  sub.add_flag("--momentum-correction", cfg->momentum_correction,
               "keep the momentum per worker before sparsification, masked where sent (DGC)");
  sub.add_option("--warmup-steps", cfg->warmup_steps,
                 "warm up over the first N steps (see --warmup-schedule), then compress at --ratio");
  sub.add_option("--warmup-schedule", cfg->warmup_schedule,
                 "dense: exchange the warm-up steps uncompressed; exponential: compress them at a "
                 "ratio falling geometrically from --warmup-start-ratio to --ratio (DGC)")
      ->check(CLI::IsMember({"dense", "exponential"}));
  sub.add_option("--warmup-start-ratio", cfg->warmup_start_ratio,
                 "exponential warm-up: the ratio of the first step");
  sub.add_option("--seed", cfg->seed, "seed of the model, the data order and the sampling");
  sub.add_option("--stages", cfg->stages, "SIDCo stages: 0 adaptive, else fixed");
  sub.add_option("--backend", cfg->backend,
                 "kernels backend (threshold fits, fft transforms): auto, cpu or cuda");
  sub.add_option("--bits", cfg->bits,
                 "qsgd-mn*: bits per scale, ascending, e.g. 4 (qsgd-mn), 6,10 (-ts), 4,6,8,10 (-ms)")
      ->delimiter(',');
  sub.add_option("--variance-alpha", cfg->variance_alpha,
                 "variance: send an element when r^2 > alpha * v");
  sub.add_option("--variance-zeta", cfg->variance_zeta, "variance: decay of v for elements not sent");
  sub.add_option("--fft-exponent-bits", cfg->fft_exponent_bits,
                 "fft: exponent bits of the kept coefficients' float layout");
  sub.add_option("--fft-mantissa-bits", cfg->fft_mantissa_bits,
                 "fft: mantissa bits of the kept coefficients' float layout");
  sub.add_option("--fft-chunk", cfg->fft_chunk, "fft: real FFT length (0: the method's default)");
  sub.add_option("--record", cfg->record, "record rank 0's raw gradients to this snapshot (.h5)");
  sub.add_flag("--force", cfg->force, "overwrite the --record file");
  sub.add_option("--timeout", cfg->timeout, "seconds a worker waits on its peers before failing");
  sub.add_flag("--json", cfg->json, "print one JSON object at the end");
  sub.add_flag("--quiet", cfg->quiet, "no per-step lines");
  sub.add_option("--rank", cfg->rank, "this worker's rank (manual placement; needs --master-port)");
  sub.add_option("--master-addr", cfg->master_addr, "address of rank 0's store");
  sub.add_option("--master-port", cfg->master_port, "port of rank 0's store");
  return [cfg] { return run(*cfg); };
}

}  // namespace

GS_COMMAND("train", "compressed (distributed) training on Fashion-MNIST", 40, setup);
