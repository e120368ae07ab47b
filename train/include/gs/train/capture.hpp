#pragma once
// The capture loop: trains a Fashion-MNIST classifier with SGD (momentum), records every K-th
// step's gradients to a snapshot file, then measures test accuracy. No torch in this header, so
// front ends compile without it.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gs/base/option_table.hpp"
#include "gs/data/codecs.hpp"
#include "gs/data/fashion_mnist.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/train/model_names.hpp"  // the names run_capture accepts

namespace gs::train {

struct CaptureConfig {
  std::string model = "cnn";  // one of model_names(): mlp, cnn, lstm
  std::int64_t steps = 938;   // about one epoch of the 60000 training images at batch 64
  std::int64_t every = 25;    // record steps 0, every, 2*every, ...
  std::int64_t batch = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::uint64_t seed = 1;     // model initialisation and shuffling
  std::filesystem::path out;  // the snapshot file to write: --out, required
  bool force = false;         // overwrite out
  int threads = 2;            // compute threads: torch intra-op and the BLAS pool
  // How the snapshot's gradients are compressed: a name of data::snapshot_codecs().
  std::string compression = data::kDefaultSnapshotCodec;
  int deflate_level = 4;  // 0..9, for compression "deflate" (0: raw floats)
  std::size_t queue_depth = 4;
  std::filesystem::path data_dir = data::fashion_mnist_dir();
  // Test images to evaluate: 0 means all 10000 (the figure to report); fewer keeps tests fast.
  std::int64_t test_images = 0;

  // gs::Error naming the first bad field: every option's check (capture_options()), then the
  // settings without a flag.
  void validate() const;
};

// One row per `gradscope capture` option, the ones train shares from gs/train/common_options.hpp
// (same help and range); the CLI's flags and CaptureConfig::validate() read it.
const std::vector<OptionRow<CaptureConfig>>& capture_options();

struct CaptureProgress {
  std::int64_t step = 0;  // steps done
  std::int64_t steps = 0;
  double loss = 0.0;  // of the last step
  std::int64_t recorded = 0;
};
using CaptureCallback = std::function<void(const CaptureProgress&)>;

struct CaptureResult {
  std::filesystem::path out;
  std::vector<data::LayerInfo> layers;
  std::int64_t steps = 0;
  std::int64_t recorded_steps = 0;
  std::vector<double> losses;    // training loss of every step, in order
  double final_loss = 0.0;       // mean over the last min(50, steps) steps
  double test_accuracy = 0.0;    // fraction of the test images classified right
  std::int64_t test_images = 0;  // how many were evaluated
  double wall_s = 0.0;           // whole run: loading, training, writing, evaluation
  double load_s = 0.0;           // reading and converting Fashion-MNIST
  double train_s = 0.0;          // the training steps alone, including the final drain
  double eval_s = 0.0;           // test-set evaluation
  double seconds_per_step = 0.0;
  // Step-time cost of recording: median time of recorded steps minus median time of the others
  // (step 0 excluded as warm-up); NaN when every step or none was recorded.
  double seconds_per_recorded_step = 0.0;
  double seconds_per_plain_step = 0.0;
  double recording_overhead_s = 0.0;
  double drain_s = 0.0;  // waiting for the writer after the last step
};

// Refuses (gs::Error) before any training when out exists and !force, or the config is invalid.
CaptureResult run_capture(const CaptureConfig& config, const CaptureCallback& progress = {});

}  // namespace gs::train
