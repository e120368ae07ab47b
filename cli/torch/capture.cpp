// gradscope capture: trains a Fashion-MNIST model and records every K-th step's gradients to a
// snapshot file (layout in docs/snapshot-format.md), then reports test accuracy and what was kept.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "torch_commands.hpp"
#include "table_flags.hpp"
#include "gs/base/bytes.hpp"
#include "gs/train/capture.hpp"
#include "progress.hpp"

namespace gs::cli {
namespace {

struct CaptureOptions {
  train::CaptureConfig config;
  bool quiet = false;
};

int run_capture_command(const CaptureOptions& options) {
  const auto& cfg = options.config;
  Progress bar("capture " + cfg.model, cfg.steps, options.quiet);
  const auto result = train::run_capture(cfg, [&](const train::CaptureProgress& p) {
    char extra[64];
    std::snprintf(extra, sizeof extra, "loss %.4f", p.loss);
    bar.update(p.step, extra);
  });
  bar.finish();

  std::int64_t values = 0;
  for (const auto& l : result.layers) values += l.numel();
  std::printf("test accuracy %.2f%% on %" PRId64 " Fashion-MNIST test images\n", 100.0 * result.test_accuracy,
              result.test_images);
  std::printf("loss %.4f at step 0, %.4f over the last steps\n", result.losses.front(), result.final_loss);
  std::printf("recorded %" PRId64 " of %" PRId64 " steps (every %" PRId64 "), %zu layers, %" PRId64
              " values per step, to %s (%s)\n",
              result.recorded_steps, result.steps, cfg.every, result.layers.size(), values, result.out.c_str(),
              gs::human_bytes(double(std::filesystem::file_size(result.out))).c_str());
  std::printf("time %.1f s in all (load %.1f, train %.1f, evaluate %.1f), %.1f ms per training step", result.wall_s,
              result.load_s, result.train_s, result.eval_s, 1e3 * result.seconds_per_step);
  if (std::isfinite(result.recording_overhead_s))
    std::printf("; recording adds %+.1f ms to a recorded step (%.1f vs %.1f ms)", 1e3 * result.recording_overhead_s,
                1e3 * result.seconds_per_recorded_step, 1e3 * result.seconds_per_plain_step);
  std::printf("\n");
  return 0;
}

}  // namespace

GS_TORCH_COMMAND("capture", [](CLI::App& sub) -> Runner {
  auto o = std::make_shared<CaptureOptions>();
  auto config = std::shared_ptr<train::CaptureConfig>(o, &o->config);
  add_table_flags(sub, train::capture_options(), config);
  sub.add_flag("--quiet", o->quiet, "no progress output");
  return [o] { return run_capture_command(*o); };
});

}  // namespace gs::cli
