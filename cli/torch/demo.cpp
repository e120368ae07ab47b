// gradscope demo: the built-in default job. Records a short Fashion-MNIST CNN training run and
// prints what was recorded. It runs as a list of steps so that later steps (analysis) slot in.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "torch_commands.hpp"
#include "gs/analyzer/analyze.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "gs/train/capture.hpp"
#include "progress.hpp"
#include "snapshot_text.hpp"

namespace gs::cli {
namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  fs::path out = "gradscope-demo.h5";
  bool force = false;
  bool quiet = false;
};

// What the steps share: the settings, then what each step produced.
struct DemoContext {
  DemoOptions options;
  train::CaptureConfig capture;
  train::CaptureResult recorded;
  analyzer::AnalysisSummary analysis;
};

struct DemoStep {
  std::string title;
  std::function<void(DemoContext&)> run;
};

// FILE.h5 -> FILE.analysis.h5 beside it (the name gradscope-gui looks for).
fs::path analysis_path(const fs::path& snapshot) {
  auto out = snapshot;
  out.replace_extension(".analysis.h5");
  return out;
}

bool demo_files_free(const fs::path& snapshot) { return !fs::exists(snapshot) && !fs::exists(analysis_path(snapshot)); }

// base if it and its analysis file are free (or force), else base-1.h5, base-2.h5, ...: a demo
// never overwrites a file.
fs::path free_demo_path(const fs::path& base, bool force) {
  if (force || demo_files_free(base)) return base;
  for (int i = 1; i < 10000; ++i) {
    auto candidate = base;
    candidate.replace_filename(base.stem().string() + "-" + std::to_string(i) + base.extension().string());
    if (demo_files_free(candidate)) return candidate;
  }
  throw Error("no free name next to " + base.string() + ": pass --out or --force");
}

// The default job: about one epoch of the CNN, every 25th step recorded. Its test accuracy and
// time on two CPU cores: README.md, "Quick start".
train::CaptureConfig demo_capture_config(const DemoOptions& options) {
  train::CaptureConfig c;
  c.model = "cnn";
  c.steps = 938;
  c.every = 25;
  c.batch = 64;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.seed = 1;
  c.out = free_demo_path(options.out, options.force);
  c.force = options.force;
  return c;
}

void record_step(DemoContext& ctx) {
  const auto& c = ctx.capture;
  std::printf("training %s on Fashion-MNIST: %" PRId64 " steps of %" PRId64
              " images, SGD lr %g momentum %g, recording every %" PRId64 " steps to %s\n",
              c.model.c_str(), c.steps, c.batch, c.lr, c.momentum, c.every, c.out.c_str());
  std::fflush(stdout);
  Progress bar("demo " + c.model, c.steps, ctx.options.quiet);
  ctx.recorded = train::run_capture(c, [&](const train::CaptureProgress& p) {
    char extra[64];
    std::snprintf(extra, sizeof extra, "loss %.4f", p.loss);
    bar.update(p.step, extra);
  });
  bar.finish();
}

// What the file holds (the text of `gradscope info`), then how the training went.
void summary_step(DemoContext& ctx) {
  const auto& r = ctx.recorded;
  data::SnapshotReader reader(r.out);
  print_snapshot_summary(reader, r.out.string());
  std::printf("test accuracy %.2f%% on the %" PRId64 " Fashion-MNIST test images\n", 100.0 * r.test_accuracy,
              r.test_images);
  std::printf("time        %.1f s (%.1f ms per step; recording adds %+.1f ms per recorded step)\n", r.wall_s,
              1e3 * r.seconds_per_step, 1e3 * r.recording_overhead_s);
}

// Every distribution and threshold method on every recorded step, per layer and whole model.
void analysis_step(DemoContext& ctx) {
  analyzer::AnalyzeConfig config;
  config.input = ctx.recorded.out;
  config.output = analysis_path(ctx.recorded.out);
  config.quiet = ctx.options.quiet;
  std::printf("analysing %s into %s\n", config.input.c_str(), config.output.c_str());
  std::fflush(stdout);
  std::unique_ptr<Progress> bar;
  ctx.analysis = analyzer::analyze_and_summarize(
      config, std::cout, [&](std::int64_t done, std::int64_t total, const std::string& note) {
        if (!bar) bar = std::make_unique<Progress>("analyse", total, ctx.options.quiet);
        bar->update(done, note);
        if (done == total) bar->finish();
      });
}

std::vector<DemoStep> demo_steps() {
  return {{"record a training run", record_step},
          {"summarise the recording", summary_step},
          {"fit distributions and compare thresholds with exact top-k", analysis_step}};
}

int run_demo(const DemoOptions& options) {
  DemoContext ctx{options, demo_capture_config(options), {}, {}};
  const auto steps = demo_steps();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::printf("[%zu/%zu] %s\n", i + 1, steps.size(), steps[i].title.c_str());
    std::fflush(stdout);
    steps[i].run(ctx);
  }
  return 0;
}

}  // namespace

GS_TORCH_COMMAND("demo", [](CLI::App& sub) -> Runner {
  auto o = std::make_shared<DemoOptions>();
  sub.add_option("--out", o->out, "snapshot file; if it exists, -1, -2, ... is appended (unless --force)")
      ->capture_default_str();
  sub.add_flag("--force", o->force, "overwrite --out if it exists");
  sub.add_flag("--quiet", o->quiet, "no progress output");
  return [o] { return run_demo(*o); };
});

}  // namespace gs::cli
