#pragma once
// The training loop every front end shares (capture, the demo, distributed training): the batches
// of a dataset in a new order each epoch, one batch step (forward, cross-entropy, backward) and the
// evaluation on held-out images. The caller owns the optimizer and what happens between backward
// and the optimizer step (recording, compressing and exchanging gradients).
#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "gs/train/dataset.hpp"
#include "gs/train/models.hpp"

namespace gs::train {

struct Batch {
  torch::Tensor images;
  torch::Tensor labels;
};

// The examples one trainer walks over (the whole training set, or one worker's shard), in the
// order shuffle(epoch) gives each epoch (a permutation of [0, examples.size(0))), cut into full
// batches; the last partial batch of an epoch is dropped.
class EpochBatches {
 public:
  using Shuffle = std::function<torch::Tensor(int epoch)>;
  // gs::Error when the examples hold fewer than one batch.
  EpochBatches(const TensorDataset& set, torch::Tensor examples, std::int64_t batch, Shuffle shuffle);
  std::int64_t per_epoch() const { return per_epoch_; }
  // Batch b of epoch `epoch`; the epoch's order is drawn when an epoch is first asked for.
  Batch get(int epoch, std::int64_t b);

 private:
  const TensorDataset& set_;
  torch::Tensor examples_;
  std::int64_t batch_;
  std::int64_t per_epoch_;
  Shuffle shuffle_;
  int epoch_ = -1;
  torch::Tensor order_;
};

// One batch step: train mode, forward, mean cross-entropy, backward (gradients add into the
// parameters' .grad: zero them first). Returns the loss.
double forward_backward(Classifier& model, const Batch& batch);

// The fraction of the first `count` examples of set (0: all of them) the model classifies right,
// evaluated in chunks without gradients. The model is left in train mode.
double evaluate(Classifier& model, const TensorDataset& set, std::int64_t count = 0);

}  // namespace gs::train
