#pragma once
// StepRecorder: the machinery that records every K-th training step's gradients without slowing
// the step down more than a copy, free of any training framework. While a recorded step runs, each
// layer's gradient is copied into a host buffer (put()); end_step() hands the filled buffer to a
// writer thread, so compressing and writing overlap the next steps. Buffers come from a fixed pool:
// a slow disk holds training back (back-pressure) instead of growing memory. An error in the
// writer thread is rethrown as gs::Error in the training thread at its next call.
//
// Front ends feed it from their framework's gradient hooks: gs::train::GradientRecorder (libtorch,
// C++) and gradscope.Recorder (PyTorch, Python).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gs/data/snapshot.hpp"

namespace gs::data {

// Where recorded steps go. append() runs on the writer thread, one call at a time; close() runs on
// the training thread after the writer thread has stopped. Both may throw.
class StepSink {
 public:
  virtual ~StepSink() = default;
  virtual void append(const StepRecord& record, std::span<const std::span<const float>> grads) = 0;
  // The loss rows of steps that are not recorded, in step order, each before any later append().
  virtual void append_losses(std::span<const StepRecord> records) { (void)records; }
  virtual void close() {}
};

// The usual sink: an open SnapshotWriter.
std::unique_ptr<StepSink> snapshot_sink(SnapshotWriter writer);

struct RecorderOptions {
  std::int64_t every = 1;       // record steps where step % every == 0
  std::size_t queue_depth = 4;  // recorded steps that may wait for the writer; >= 1
};

class StepRecorder {
 public:
  // gs::Error for no layers, no sink, every < 1 or queue_depth < 1.
  StepRecorder(std::vector<LayerInfo> layers, std::unique_ptr<StepSink> sink, RecorderOptions options = {});
  ~StepRecorder();  // stops the writer thread; never throws
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // Before the gradients of training step `step` arrive (steps must increase). Returns whether
  // this step is recorded; blocks while every buffer waits for the writer.
  bool begin_step(std::int64_t step);
  // Whether a recorded step is being captured (between begin_step and end_step).
  bool capturing() const { return current_ != nullptr; }
  // Layer `layer`'s gradient for the step being captured (layers()[layer].numel() floats); a
  // second put for the same layer adds to the first. Does nothing when the step is not recorded.
  // gs::Error for a layer index or size that does not match.
  void put(std::size_t layer, std::span<const float> grad);
  // After the step's gradients: queues the captured step (if any) with its loss and learning rate,
  // or, for a step that is not recorded, its loss and learning rate alone (the sink's
  // append_losses, written in batches). A layer that got no put() this step is recorded as zeros.
  void end_step(double loss, double lr);
  // Writes everything queued, stops the writer thread and closes the sink. Idempotent.
  void finish();

  std::int64_t every() const { return options_.every; }
  std::int64_t steps_recorded() const { return recorded_; }
  const std::vector<LayerInfo>& layers() const { return layers_; }

 private:
  struct Buffer {
    StepRecord record;
    std::vector<std::vector<float>> grads;  // one per layer
    std::vector<char> filled;               // put() this step
  };
  void writer_loop();
  void throw_if_failed();  // caller holds no lock
  void stop_thread() noexcept;

  RecorderOptions options_;
  std::vector<LayerInfo> layers_;
  std::unique_ptr<StepSink> sink_;
  std::vector<Buffer> buffers_;
  Buffer* current_ = nullptr;  // buffer being filled this step; training thread only
  bool step_open_ = false;     // between begin_step and end_step; training thread only
  std::int64_t last_step_ = -1;
  std::int64_t recorded_ = 0;
  bool finished_ = false;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Buffer*> free_, pending_;
  // Losses of steps that are not recorded, for the writer: written with the next recorded step,
  // once kLossBatch wait, and when the recorder stops.
  static constexpr std::size_t kLossBatch = 32;
  std::vector<StepRecord> losses_;
  bool stopping_ = false;
  std::string error_;  // first writer-thread failure, empty while none
  std::thread thread_;
};

}  // namespace gs::data
