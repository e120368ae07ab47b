// The shared training loop (train/src/loop.cpp) on small random data: the epochs' batches, one
// batch step and the evaluation, each against what it must equal when computed by hand.
#include <gtest/gtest.h>

#include <set>

#include "gs/base/error.hpp"
#include "gs/train/loop.hpp"

namespace {

using gs::train::EpochBatches;
using gs::train::TensorDataset;

// n random 28x28 images with labels 0..9, from a fixed seed.
TensorDataset random_set(std::int64_t n, std::uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({n, 1, 28, 28}), torch::randint(0, 10, {n}, torch::kInt64)};
}

TEST(EpochBatches, EachEpochWalksItsOwnOrderInFullBatches) {
  const TensorDataset set = random_set(50, 1);
  // Examples 5..27 (a shard of 23): 4 batches of 5, the last 3 dropped.
  const torch::Tensor shard = torch::arange(5, 28, torch::kInt64);
  std::vector<int> asked;
  EpochBatches batches(set, shard, 5, [&](int epoch) {
    asked.push_back(epoch);
    return torch::randperm(23, torch::TensorOptions().dtype(torch::kInt64)).roll(epoch);
  });
  ASSERT_EQ(batches.per_epoch(), 4);
  std::vector<std::set<std::int64_t>> seen(2);
  for (int epoch = 0; epoch < 2; ++epoch)
    for (std::int64_t b = 0; b < batches.per_epoch(); ++b) {
      const auto batch = batches.get(epoch, b);
      ASSERT_EQ(batch.images.size(0), 5);
      ASSERT_EQ(batch.labels.size(0), 5);
      for (std::int64_t i = 0; i < 5; ++i) {
        // Which example this is: the one whose image it is, and its label comes with it.
        std::int64_t found = -1;
        for (std::int64_t e = 5; e < 28; ++e)
          if (torch::equal(set.images[e], batch.images[i])) found = e;
        ASSERT_GE(found, 5) << "an example outside the shard";
        EXPECT_EQ(set.labels[found].item<std::int64_t>(), batch.labels[i].item<std::int64_t>());
        EXPECT_TRUE(seen[std::size_t(epoch)].insert(found).second) << "example " << found << " twice";
      }
    }
  EXPECT_EQ(seen[0].size(), 20u);
  EXPECT_EQ(asked, (std::vector<int>{0, 1}));  // one order per epoch, drawn when first asked for
  batches.get(1, 3);
  EXPECT_EQ(asked.size(), 2u);
}

TEST(EpochBatches, FewerExamplesThanABatchAreRefused) {
  const TensorDataset set = random_set(8, 2);
  auto order = [](int) { return torch::arange(8, torch::kInt64); };
  EXPECT_THROW(EpochBatches(set, torch::arange(8, torch::kInt64), 9, order), gs::Error);
  EXPECT_THROW(EpochBatches(set, torch::arange(8, torch::kInt64), 0, order), gs::Error);
  EXPECT_EQ(EpochBatches(set, torch::arange(8, torch::kInt64), 8, order).per_epoch(), 1);
}

TEST(TrainingLoop, ForwardBackwardAddsTheMeanCrossEntropysGradient) {
  const TensorDataset set = random_set(16, 3);
  torch::manual_seed(4);
  auto model = gs::train::make_model("mlp");
  const gs::train::Batch batch{set.images, set.labels};
  model->eval();
  const double loss = gs::train::forward_backward(*model, batch);
  EXPECT_TRUE(model->is_training());
  {
    torch::NoGradGuard no_grad;
    const auto want = torch::nn::functional::cross_entropy(model->forward(set.images), set.labels);
    EXPECT_NEAR(loss, want.item<double>(), 1e-6);
  }
  std::vector<torch::Tensor> once;
  for (const auto& p : model->parameters()) once.push_back(p.grad().clone());
  gs::train::forward_backward(*model, batch);  // adds: the caller zeroes between steps
  std::size_t i = 0;
  for (const auto& p : model->parameters()) EXPECT_TRUE(torch::allclose(p.grad(), 2 * once[i++]));
}

TEST(TrainingLoop, EvaluateCountsTheRightAnswers) {
  const TensorDataset set = random_set(2500, 5);  // more than one evaluation chunk
  torch::manual_seed(6);
  auto model = gs::train::make_model("mlp");
  torch::Tensor predicted;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    predicted = model->forward(set.images).argmax(1);
  }
  const auto correct = [&](std::int64_t n) {
    return predicted.slice(0, 0, n).eq(set.labels.slice(0, 0, n)).sum().item<double>() / double(n);
  };
  model->train();
  EXPECT_DOUBLE_EQ(gs::train::evaluate(*model, set), correct(2500));
  EXPECT_DOUBLE_EQ(gs::train::evaluate(*model, set, 1200), correct(1200));
  EXPECT_DOUBLE_EQ(gs::train::evaluate(*model, set, 9999), correct(2500));  // at most the whole set
  EXPECT_TRUE(model->is_training());
}

}  // namespace
