// Models, dataset tensors and GradientRecorder against in-memory sinks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "gs/base/error.hpp"
#include "gs/train/dataset.hpp"
#include "gs/train/models.hpp"
#include "gs/train/recorder.hpp"

namespace {

using gs::train::GradientRecorder;

struct Recorded {
  gs::data::StepRecord record;
  std::vector<std::vector<float>> grads;
};

// Keeps every appended step; optionally fails on one, or is slow.
class MemorySink final : public gs::train::StepSink {
 public:
  explicit MemorySink(std::vector<Recorded>* out, int fail_at = -1, int delay_ms = 0)
      : out_(out), fail_at_(fail_at), delay_ms_(delay_ms) {}
  void append(const gs::data::StepRecord& record, std::span<const std::span<const float>> grads) override {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (static_cast<int>(out_->size()) == fail_at_) throw gs::Error("disk full (simulated)");
    Recorded r{record, {}};
    for (auto g : grads) r.grads.emplace_back(g.begin(), g.end());
    out_->push_back(std::move(r));
  }
  void close() override { closed = true; }
  bool closed = false;

 private:
  std::vector<Recorded>* out_;
  int fail_at_, delay_ms_;
};

// One SGD-free training step of model on a fresh random batch; returns the loss.
double step_once(gs::train::Classifier& model, std::int64_t batch = 8) {
  model.zero_grad();
  const auto x = torch::randn({batch, 1, 28, 28});
  const auto y = torch::randint(0, 10, {batch}, torch::kInt64);
  const auto loss = torch::nn::functional::cross_entropy(model.forward(x), y);
  loss.backward();
  return loss.item<double>();
}

std::vector<float> as_vector(const torch::Tensor& t) {
  const auto c = t.detach().contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

TEST(Models, FactoryBuildsEveryModelWithTorchParameterNames) {
  torch::manual_seed(3);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
      {"mlp", {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}},
      {"cnn",
       {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight",
        "fc2.bias"}},
      {"lstm",
       {"lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0", "head.weight", "head.bias"}}};
  ASSERT_EQ(gs::train::model_names(), (std::vector<std::string>{"mlp", "cnn", "lstm"}));
  for (const auto& [name, params] : expected) {
    auto model = gs::train::make_model(name);
    const auto layers = gs::train::parameter_layers(*model);
    ASSERT_EQ(layers.size(), params.size()) << name;
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(layers[i].name, params[i]) << name;
    const auto logits = model->forward(torch::randn({5, 1, 28, 28}));
    EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{5, 10})) << name;
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << name;
  }
  const auto cnn = gs::train::parameter_layers(*gs::train::make_model("cnn"));
  EXPECT_EQ(cnn[0].shape, (std::vector<std::int64_t>{16, 1, 3, 3}));
  EXPECT_EQ(cnn[4].shape, (std::vector<std::int64_t>{128, 1568}));
  const auto lstm = gs::train::parameter_layers(*gs::train::make_model("lstm"));
  EXPECT_EQ(lstm[0].shape, (std::vector<std::int64_t>{512, 28}));  // 4 gates x hidden 128
}

TEST(Models, UnknownNameListsTheChoices) {
  try {
    gs::train::make_model("resnet");
    FAIL() << "no error for an unknown model";
  } catch (const gs::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("resnet"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mlp, cnn, lstm"), std::string::npos) << msg;
  }
}

TEST(Dataset, NormalisedWithTheTrainingSetsStatistics) {
  const auto train = gs::train::fashion_mnist_tensors("train");
  ASSERT_EQ(train.images.sizes(), (std::vector<std::int64_t>{60000, 1, 28, 28}));
  ASSERT_EQ(train.images.scalar_type(), torch::kFloat32);
  ASSERT_EQ(train.labels.scalar_type(), torch::kInt64);
  // The stated constants standardise the training pixels: mean 0, std 1 within rounding of the
  // constants (4 decimals).
  const auto x = train.images.to(torch::kFloat64);
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 2e-3);
  EXPECT_NEAR(x.std().item<double>(), 1.0, 2e-3);
  // Fashion-MNIST's training set is balanced: 6000 images per class.
  const auto counts = torch::bincount(train.labels);
  ASSERT_EQ(counts.size(0), 10);
  EXPECT_TRUE(counts.eq(6000).all().item<bool>());
  const auto test = gs::train::fashion_mnist_tensors("test");
  EXPECT_EQ(test.size(), 10000);
}

TEST(Recorder, CopiesEveryKthStepsGradientsExactly) {
  torch::manual_seed(11);
  auto model = gs::train::make_model("mlp");
  std::vector<Recorded> got;
  auto sink = std::make_unique<MemorySink>(&got);
  auto* sink_ptr = sink.get();
  GradientRecorder recorder(*model, std::move(sink), {.every = 3, .queue_depth = 2});
  std::vector<std::vector<std::vector<float>>> expected;  // per recorded step, per layer
  for (std::int64_t step = 0; step < 10; ++step) {
    const bool recording = recorder.begin_step(step);
    EXPECT_EQ(recording, step % 3 == 0);
    const double loss = step_once(*model);
    recorder.end_step(loss, 0.1);
    if (recording) {
      std::vector<std::vector<float>> layers;
      for (const auto& p : model->parameters()) layers.push_back(as_vector(p.grad()));
      expected.push_back(std::move(layers));
    }
  }
  recorder.finish();
  EXPECT_TRUE(sink_ptr->closed);
  EXPECT_EQ(recorder.steps_recorded(), 4);
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].record.step, static_cast<std::int64_t>(3 * i));
    EXPECT_EQ(got[i].record.lr, 0.1);
    EXPECT_GT(got[i].record.loss, 0.0);
    ASSERT_EQ(got[i].grads.size(), 6u);
    for (std::size_t l = 0; l < 6; ++l) EXPECT_EQ(got[i].grads[l], expected[i][l]) << i << " " << l;
  }
  EXPECT_NO_THROW(recorder.finish());  // idempotent
  EXPECT_THROW(recorder.begin_step(20), gs::Error);
}

TEST(Recorder, SlowSinkHoldsTrainingBackAndLosesNothing) {
  torch::manual_seed(12);
  auto model = gs::train::make_model("mlp");
  std::vector<Recorded> got;
  GradientRecorder recorder(*model, std::make_unique<MemorySink>(&got, -1, 30), {.every = 1, .queue_depth = 1});
  for (std::int64_t step = 0; step < 6; ++step) {
    recorder.begin_step(step);
    recorder.end_step(step_once(*model), 0.01);
  }
  recorder.finish();
  ASSERT_EQ(got.size(), 6u);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].record.step, std::int64_t(i));
}

TEST(Recorder, WriterThreadFailureSurfacesInTheTrainingThread) {
  torch::manual_seed(13);
  auto model = gs::train::make_model("mlp");
  std::vector<Recorded> got;
  GradientRecorder recorder(*model, std::make_unique<MemorySink>(&got, /*fail_at=*/1), {.every = 1, .queue_depth = 1});
  std::string message;
  std::int64_t step = 0;
  try {
    // The failure of step 1's write must reach us within a few steps (the queue holds one).
    for (; step < 50; ++step) {
      recorder.begin_step(step);
      recorder.end_step(step_once(*model), 0.01);
    }
    recorder.finish();
  } catch (const gs::Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "the sink's failure never surfaced";
  EXPECT_NE(message.find("disk full (simulated)"), std::string::npos) << message;
  EXPECT_NE(message.find("step 1"), std::string::npos) << message;
  EXPECT_LT(step, 50);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_THROW(recorder.finish(), gs::Error);  // finish reports it too
}

TEST(Recorder, FailureOnTheLastStepSurfacesAtFinish) {
  torch::manual_seed(14);
  auto model = gs::train::make_model("mlp");
  std::vector<Recorded> got;
  GradientRecorder recorder(*model, std::make_unique<MemorySink>(&got, /*fail_at=*/0), {.every = 1, .queue_depth = 4});
  recorder.begin_step(0);
  recorder.end_step(step_once(*model), 0.01);
  EXPECT_THROW(recorder.finish(), gs::Error);
}

// A parameter the forward pass does not use gets no gradient: it is recorded as zeros.
struct PartlyUsed : gs::train::Classifier {
  PartlyUsed() {
    used = register_module("used", torch::nn::Linear(784, 10));
    unused = register_module("unused", torch::nn::Linear(3, 2));
  }
  torch::Tensor forward(torch::Tensor x) override { return used(x.flatten(1)); }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

TEST(Recorder, UnusedParametersAreRecordedAsZeros) {
  torch::manual_seed(15);
  PartlyUsed model;
  std::vector<Recorded> got;
  GradientRecorder recorder(model, std::make_unique<MemorySink>(&got), {});
  recorder.begin_step(0);
  recorder.end_step(step_once(model), 0.01);
  recorder.finish();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].grads.size(), 4u);
  for (std::size_t l = 0; l < 2; ++l)
    EXPECT_TRUE(std::any_of(got[0].grads[l].begin(), got[0].grads[l].end(), [](float v) { return v != 0.0f; }));
  for (std::size_t l = 2; l < 4; ++l)
    EXPECT_TRUE(std::all_of(got[0].grads[l].begin(), got[0].grads[l].end(), [](float v) { return v == 0.0f; }));
}

TEST(Recorder, RejectsBadArguments) {
  auto model = gs::train::make_model("mlp");
  std::vector<Recorded> got;
  EXPECT_THROW(GradientRecorder(*model, std::make_unique<MemorySink>(&got), {.every = 0}), gs::Error);
  EXPECT_THROW(GradientRecorder(*model, std::make_unique<MemorySink>(&got), {.queue_depth = 0}), gs::Error);
  EXPECT_THROW(GradientRecorder(*model, std::unique_ptr<gs::train::StepSink>{}), gs::Error);
  GradientRecorder recorder(*model, std::make_unique<MemorySink>(&got), {});
  recorder.begin_step(5);
  recorder.end_step(1.0, 0.1);
  EXPECT_THROW(recorder.begin_step(5), gs::Error);  // steps must increase
}

TEST(Recorder, SnapshotWriterMustMatchTheModelsLayers) {
  const auto dir = std::filesystem::temp_directory_path() / ("gs_train_rec_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto mlp = gs::train::make_model("mlp");
  auto cnn = gs::train::make_model("cnn");
  gs::data::SnapshotMeta meta;
  meta.model = "cnn";
  gs::data::SnapshotWriter writer(dir / "cnn.h5", meta, gs::train::parameter_layers(*cnn), {.force = true});
  EXPECT_THROW(GradientRecorder(*mlp, std::move(writer)), gs::Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
