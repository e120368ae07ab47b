// The shared training loop: epoch batches, the batch step and the evaluation.
#include "gs/train/loop.hpp"

#include <algorithm>
#include <string>

#include "gs/base/error.hpp"

namespace gs::train {

EpochBatches::EpochBatches(const TensorDataset& set, torch::Tensor examples, std::int64_t batch, Shuffle shuffle)
    : set_(set), examples_(std::move(examples)), batch_(batch), shuffle_(std::move(shuffle)) {
  if (batch_ < 1) throw Error("batch size must be at least 1");
  per_epoch_ = examples_.size(0) / batch_;
  if (per_epoch_ < 1)
    throw Error("the " + std::to_string(examples_.size(0)) + " training examples hold less than one batch of " +
                std::to_string(batch_));
}

Batch EpochBatches::get(int epoch, std::int64_t b) {
  if (epoch != epoch_) {
    order_ = examples_.index_select(0, shuffle_(epoch));
    epoch_ = epoch;
  }
  const auto idx = order_.slice(0, b * batch_, (b + 1) * batch_);
  return {set_.images.index_select(0, idx), set_.labels.index_select(0, idx)};
}

double forward_backward(Classifier& model, const Batch& batch) {
  model.train();
  const auto loss = torch::nn::functional::cross_entropy(model.forward(batch.images), batch.labels);
  loss.backward();
  return loss.item<double>();
}

double evaluate(Classifier& model, const TensorDataset& set, std::int64_t count) {
  if (count <= 0 || count > set.size()) count = set.size();
  torch::NoGradGuard no_grad;
  model.eval();
  constexpr std::int64_t chunk = 1000;
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < count; i += chunk) {
    const auto end = std::min(count, i + chunk);
    const auto predicted = model.forward(set.images.slice(0, i, end)).argmax(1);
    correct += predicted.eq(set.labels.slice(0, i, end)).sum().item<std::int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(count);
}

}  // namespace gs::train
