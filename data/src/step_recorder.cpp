// StepRecorder: pooled host buffers filled by put() while a recorded step runs; a writer thread
// drains filled buffers into the sink and returns them to the pool.
#include "gs/data/step_recorder.hpp"

#include <algorithm>
#include <cstring>

#include "gs/base/error.hpp"

namespace gs::data {

namespace {

class SnapshotSink final : public StepSink {
 public:
  explicit SnapshotSink(SnapshotWriter writer) : writer_(std::move(writer)) {}
  void append(const StepRecord& record, std::span<const std::span<const float>> grads) override {
    writer_.append(record, grads);
  }
  void append_losses(std::span<const StepRecord> records) override { writer_.append_losses(records); }
  void close() override { writer_.close(); }

 private:
  SnapshotWriter writer_;
};

}  // namespace

std::unique_ptr<StepSink> snapshot_sink(SnapshotWriter writer) {
  return std::make_unique<SnapshotSink>(std::move(writer));
}

StepRecorder::StepRecorder(std::vector<LayerInfo> layers, std::unique_ptr<StepSink> sink, RecorderOptions options)
    : options_(options), layers_(std::move(layers)), sink_(std::move(sink)) {
  if (options_.every < 1)
    throw Error("recording interval must be at least 1 step (got " + std::to_string(options_.every) + ")");
  if (options_.queue_depth < 1) throw Error("recorder queue depth must be at least 1");
  if (!sink_) throw Error("gradient recorder needs a sink to write to");
  if (layers_.empty()) throw Error("model has no trainable parameters to record");
  // queue_depth buffers may wait for the writer while one more is being filled.
  buffers_.resize(options_.queue_depth + 1);
  for (auto& b : buffers_) {
    b.grads.reserve(layers_.size());
    for (const auto& layer : layers_) b.grads.emplace_back(static_cast<std::size_t>(layer.numel()));
    b.filled.assign(layers_.size(), 0);
    free_.push_back(&b);
  }
  thread_ = std::thread([this] { writer_loop(); });
}

StepRecorder::~StepRecorder() { stop_thread(); }

void StepRecorder::throw_if_failed() {
  std::lock_guard lock(mutex_);
  if (!error_.empty()) throw Error("gradient recording failed: " + error_);
}

bool StepRecorder::begin_step(std::int64_t step) {
  if (finished_) throw Error("gradient recorder already finished: no more steps can be recorded");
  if (step <= last_step_)
    throw Error("training steps must increase: step " + std::to_string(step) + " after " + std::to_string(last_step_));
  if (current_ != nullptr) throw Error("begin_step called twice without end_step");
  throw_if_failed();
  last_step_ = step;
  step_open_ = true;
  if (step % options_.every != 0) return false;

  std::unique_lock lock(mutex_);
  // Back-pressure: wait for the writer to return a buffer (or to fail, which returns them all).
  cv_.wait(lock, [&] { return !free_.empty() || !error_.empty(); });
  if (!error_.empty()) throw Error("gradient recording failed: " + error_);
  current_ = free_.front();
  free_.pop_front();
  lock.unlock();
  current_->record = {step, 0.0, 0.0};
  std::fill(current_->filled.begin(), current_->filled.end(), 0);
  return true;
}

void StepRecorder::put(std::size_t layer, std::span<const float> grad) {
  if (current_ == nullptr) return;
  if (layer >= layers_.size())
    throw Error("gradient recorder: layer " + std::to_string(layer) + " of " + std::to_string(layers_.size()));
  auto& dest = current_->grads[layer];
  if (grad.size() != dest.size())
    throw Error("gradient recorder: layer '" + layers_[layer].name + "' has " + std::to_string(dest.size()) +
                " elements, its gradient " + std::to_string(grad.size()));
  // A parameter used twice in one graph reaches its leaf hook once, already summed; adding here
  // keeps the result right should a hook ever fire twice.
  if (current_->filled[layer]) {
    for (std::size_t i = 0; i < dest.size(); ++i) dest[i] += grad[i];
  } else {
    std::memcpy(dest.data(), grad.data(), dest.size() * sizeof(float));
    current_->filled[layer] = 1;
  }
}

void StepRecorder::end_step(double loss, double lr) {
  const bool open = step_open_;
  step_open_ = false;
  if (current_ == nullptr) {
    throw_if_failed();
    if (!open) return;
    std::lock_guard lock(mutex_);
    losses_.push_back({last_step_, loss, lr});
    if (losses_.size() >= kLossBatch) cv_.notify_all();
    return;
  }
  Buffer* buffer = current_;
  current_ = nullptr;
  buffer->record.loss = loss;
  buffer->record.lr = lr;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (!buffer->filled[i]) std::fill(buffer->grads[i].begin(), buffer->grads[i].end(), 0.0f);
  {
    std::lock_guard lock(mutex_);
    if (!error_.empty()) {
      free_.push_back(buffer);
      throw Error("gradient recording failed: " + error_);
    }
    pending_.push_back(buffer);
  }
  cv_.notify_all();
  ++recorded_;
}

void StepRecorder::writer_loop() {
  std::vector<std::span<const float>> spans(layers_.size());
  std::vector<StepRecord> losses;
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return !pending_.empty() || losses_.size() >= kLossBatch || stopping_; });
    if (pending_.empty() && losses_.empty()) return;  // stopping, nothing left
    Buffer* buffer = nullptr;
    if (!pending_.empty()) {
      buffer = pending_.front();
      pending_.pop_front();
    }
    // The losses of the steps before this one (all of them when no step waits): they came first.
    const auto later = std::find_if(losses_.begin(), losses_.end(),
                                    [&](const StepRecord& r) { return buffer && r.step > buffer->record.step; });
    losses.assign(losses_.begin(), later);
    losses_.erase(losses_.begin(), later);
    if (error_.empty()) {
      lock.unlock();
      std::string failure;
      const std::int64_t step = buffer ? buffer->record.step : losses.back().step;
      try {
        sink_->append_losses(losses);
        if (buffer) {
          for (std::size_t i = 0; i < layers_.size(); ++i) spans[i] = buffer->grads[i];
          sink_->append(buffer->record, spans);
        }
      } catch (const std::exception& e) {
        failure = "step " + std::to_string(step) + ": " + e.what();
      } catch (...) {
        failure = "step " + std::to_string(step) + ": unknown error";
      }
      lock.lock();
      if (!failure.empty() && error_.empty()) error_ = failure;
    }
    // After a failure the remaining steps are dropped, so the training thread never waits forever.
    if (buffer) free_.push_back(buffer);
    cv_.notify_all();
  }
}

void StepRecorder::stop_thread() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StepRecorder::finish() {
  if (finished_) {
    throw_if_failed();  // a failure stays reported
    return;
  }
  finished_ = true;
  if (current_ != nullptr) {  // a begun step that never ended is dropped
    std::lock_guard lock(mutex_);
    free_.push_back(current_);
    current_ = nullptr;
  }
  stop_thread();
  throw_if_failed();
  try {
    sink_->close();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("closing the gradient snapshot failed: ") + e.what());
  }
}

}  // namespace gs::data
