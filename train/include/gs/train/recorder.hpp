#pragma once
// GradientRecorder: records every K-th training step's gradients of a libtorch model, all layers at
// once, without slowing the step down more than a copy. A hook on every trainable parameter copies
// its gradient to host float32 while backward() runs and hands it to a gs::data::StepRecorder,
// whose writer thread compresses and writes it while the next steps run; its fixed buffer pool
// holds training back when the disk is slow (back-pressure). An error in the writer thread is
// rethrown as gs::Error in the training thread at its next call (begin_step, end_step or finish).
//
//   GradientRecorder rec(*model, SnapshotWriter(path, meta, parameter_layers(*model)), {.every = 10});
//   for (step ...) { rec.begin_step(step); loss.backward(); rec.end_step(loss_value, lr); opt.step(); }
//   rec.finish();
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gs/data/snapshot.hpp"
#include "gs/data/step_recorder.hpp"

namespace gs::train {

using data::RecorderOptions;
using data::snapshot_sink;
using data::StepSink;

// A new snapshot of gradscope's own Fashion-MNIST training (`gradscope capture`, `gradscope train
// --record`): its metadata names the model, the dataset and the seed.
data::SnapshotWriter fashion_mnist_snapshot(const std::string& path, const std::string& model, std::uint64_t seed,
                                            const std::vector<data::LayerInfo>& layers,
                                            const data::WriterOptions& options);

class GradientRecorder {
 public:
  // Hooks every parameter of model with requires_grad (model must outlive the recorder, or at
  // least its hooks must never fire after). sink receives layers in parameter_layers(model) order.
  GradientRecorder(torch::nn::Module& model, std::unique_ptr<StepSink> sink, RecorderOptions options = {});
  // As above; gs::Error when writer's layers differ from parameter_layers(model).
  GradientRecorder(torch::nn::Module& model, data::SnapshotWriter writer, RecorderOptions options = {});
  ~GradientRecorder();  // stops the writer thread and removes the hooks; never throws
  GradientRecorder(const GradientRecorder&) = delete;
  GradientRecorder& operator=(const GradientRecorder&) = delete;

  // Call before backward() of training step `step` (steps must increase). Returns whether the
  // hooks will capture this step; blocks while every buffer waits for the writer.
  bool begin_step(std::int64_t step) { return core_.begin_step(step); }
  // Call after backward(): queues the captured step (if any) with its loss and learning rate. A
  // parameter whose hook did not fire this step (unused by the forward pass) is recorded as zeros.
  void end_step(double loss, double lr) { core_.end_step(loss, lr); }
  // Writes everything queued, stops the writer thread and closes the sink. Idempotent.
  void finish() { core_.finish(); }

  std::int64_t every() const { return core_.every(); }
  std::int64_t steps_recorded() const { return core_.steps_recorded(); }
  const std::vector<data::LayerInfo>& layers() const { return core_.layers(); }

 private:
  data::StepRecorder core_;
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;  // parameter, hook handle
};

}  // namespace gs::train
