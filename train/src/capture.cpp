// The capture loop: SGD with momentum on Fashion-MNIST, gradients recorded through
// GradientRecorder, test accuracy at the end.
#include "gs/train/capture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "gs/base/quantile.hpp"
#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"
#include "gs/train/common_options.hpp"
#include "gs/train/dataset.hpp"
#include "gs/train/loop.hpp"
#include "gs/train/models.hpp"
#include "gs/train/recorder.hpp"
#include "gs/train/threads.hpp"

namespace gs::train {

const std::vector<OptionRow<CaptureConfig>>& capture_options() {
  using C = CaptureConfig;
  auto at_least = [](const char* flag, std::int64_t low) {
    return [flag, low](const auto& v) {
      if (std::int64_t(v) < low)
        throw Error(std::string(flag) + " must be at least " + std::to_string(low) + " (got " + std::to_string(v) +
                    ")");
    };
  };
  static const std::vector<OptionRow<C>> table = {
      common_option<C>("--model"),
      option_row<std::int64_t, C>(
          "--steps", "training steps (SGD updates)", [](auto& c) -> auto& { return c.steps; }, at_least("--steps", 1)),
      option_row<std::int64_t, C>(
          "--every", "record steps 0, K, 2K, ...", [](auto& c) -> auto& { return c.every; }, at_least("--every", 1)),
      common_option<C>("--batch"),
      common_option<C>("--lr"),
      common_option<C>("--momentum"),
      common_option<C>("--seed"),
      option_row<int, C>(
          "--threads", "compute threads (torch and BLAS)", [](auto& c) -> auto& { return c.threads; },
          at_least("--threads", 1)),
      option_row<std::string, C>(
          "--compression",
          "how the snapshot's gradients are compressed (lz4 is fast; deflate "
          "is smaller and slower; none stores raw floats)",
          [](auto& c) -> auto& { return c.compression; }, {}, data::snapshot_codec_names()),
      option_row<int, C>(
          "--deflate", "deflate level 0..9, for --compression deflate",
          [](auto& c) -> auto& { return c.deflate_level; },
          [](const int& v) {
            if (v < 0 || v > 9) throw Error("--deflate must be between 0 and 9 (got " + std::to_string(v) + ")");
          }),
      option_row<std::filesystem::path, C>(
          "--out", "snapshot file to write (.h5)", [](auto& c) -> auto& { return c.out; },
          [](const std::filesystem::path& p) {
            if (p.empty()) throw Error("--out: name the snapshot file to write");
          }),
      option_row<bool, C>(
          "--force", "overwrite --out if it exists", [](auto& c) -> auto& { return c.force; }),
  };
  return table;
}

void CaptureConfig::validate() const {
  for (const auto& o : capture_options()) o.check(*this);
  if (queue_depth < 1) throw Error("queue depth must be at least 1");
  if (test_images < 0 || test_images > 10000)
    throw Error("test_images must be between 0 (all) and 10000 (got " + std::to_string(test_images) + ")");
}

namespace {

// The recorder of the run, over a new snapshot file (created, and its directory checked, before
// the data are loaded).
GradientRecorder open_recorder(const CaptureConfig& config, torch::nn::Module& model,
                               const std::vector<data::LayerInfo>& layers) {
  data::WriterOptions writer_options;
  writer_options.force = config.force;
  writer_options.compression = config.compression;
  writer_options.deflate_level = config.deflate_level;
  return GradientRecorder(model, fashion_mnist_snapshot(config.out, config.model, config.seed, layers, writer_options),
                          {config.every, config.queue_depth});
}

// The loss over the last steps and the step times: median with and without recording.
void add_step_figures(CaptureResult& result, const std::vector<double>& recorded_times,
                      const std::vector<double>& plain_times) {
  const auto tail = std::min<std::size_t>(50, result.losses.size());
  result.final_loss =
      std::accumulate(result.losses.end() - static_cast<std::ptrdiff_t>(tail), result.losses.end(), 0.0) /
      static_cast<double>(tail);
  result.seconds_per_step = result.train_s / static_cast<double>(result.steps);
  result.seconds_per_recorded_step = gs::median(recorded_times);
  result.seconds_per_plain_step = gs::median(plain_times);
  result.recording_overhead_s = result.seconds_per_recorded_step - result.seconds_per_plain_step;
}

}  // namespace

CaptureResult run_capture(const CaptureConfig& config, const CaptureCallback& progress) {
  config.validate();
  // Refuse before any work: nothing a user wrote is overwritten without force.
  if (std::filesystem::exists(config.out) && !config.force)
    throw Error(config.out.string() + " exists: choose another output file or force overwriting (--force)");

  const auto t_start = Clock::now();
  set_compute_threads(config.threads);
  torch::manual_seed(config.seed);

  auto model = make_model(config.model);
  const auto layers = parameter_layers(*model);
  GradientRecorder recorder = open_recorder(config, *model, layers);

  const auto t_load = Clock::now();
  const auto train_set = fashion_mnist_tensors("train", config.data_dir);
  const auto test_set = fashion_mnist_tensors("test", config.data_dir);
  const std::int64_t test_count =
      config.test_images > 0 ? std::min(config.test_images, test_set.size()) : test_set.size();
  const std::int64_t n = train_set.size();
  // The whole training set, reshuffled from torch's global generator at each epoch.
  EpochBatches batches(train_set, torch::arange(n, torch::kInt64), config.batch,
                       [n](int) { return torch::randperm(n, torch::kInt64); });

  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(config.lr).momentum(config.momentum));
  model->train();

  CaptureResult result;
  result.load_s = seconds_since(t_load);
  result.out = config.out;
  result.layers = layers;
  result.losses.reserve(static_cast<std::size_t>(config.steps));
  std::vector<double> recorded_times, plain_times;
  const auto t_train = Clock::now();
  for (std::int64_t step = 0; step < config.steps; ++step) {
    const auto t_step = Clock::now();
    const Batch batch = batches.get(static_cast<int>(step / batches.per_epoch()), step % batches.per_epoch());
    optimizer.zero_grad();
    const bool recorded = recorder.begin_step(step);
    const double loss_value = forward_backward(*model, batch);
    recorder.end_step(loss_value, config.lr);
    optimizer.step();

    result.losses.push_back(loss_value);
    if (step > 0) (recorded ? recorded_times : plain_times).push_back(seconds_since(t_step));
    if (progress) progress({step + 1, config.steps, loss_value, recorder.steps_recorded()});
  }
  const auto t_drain = Clock::now();
  recorder.finish();
  result.drain_s = seconds_since(t_drain);
  result.train_s = seconds_since(t_train);

  const auto t_eval = Clock::now();
  result.test_accuracy = evaluate(*model, test_set, test_count);
  result.test_images = test_count;
  result.eval_s = seconds_since(t_eval);
  result.steps = config.steps;
  result.recorded_steps = recorder.steps_recorded();
  add_step_figures(result, recorded_times, plain_times);
  result.wall_s = seconds_since(t_start);
  return result;
}

}  // namespace gs::train
