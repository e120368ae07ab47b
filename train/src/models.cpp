// Fashion-MNIST models and the tensor form of the dataset.
#include "gs/train/models.hpp"

#include <algorithm>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"
#include "gs/train/dataset.hpp"

namespace gs::train {

namespace nn = torch::nn;

Mlp::Mlp() {
  fc1_ = register_module("fc1", nn::Linear(784, 256));
  fc2_ = register_module("fc2", nn::Linear(256, 128));
  fc3_ = register_module("fc3", nn::Linear(128, 10));
}

torch::Tensor Mlp::forward(torch::Tensor images) {
  auto x = images.flatten(1);
  x = torch::relu(tapped(fc1_, x));
  x = torch::relu(tapped(fc2_, x));
  return tapped(fc3_, x);
}

Cnn::Cnn() {
  conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)));
  conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)));
  fc1_ = register_module("fc1", nn::Linear(32 * 7 * 7, 128));
  fc2_ = register_module("fc2", nn::Linear(128, 10));
}

torch::Tensor Cnn::forward(torch::Tensor images) {
  auto x = torch::max_pool2d(torch::relu(tapped(conv1_, images)), 2);  // 16 x 14 x 14
  x = torch::max_pool2d(torch::relu(tapped(conv2_, x)), 2);            // 32 x 7 x 7
  x = torch::relu(tapped(fc1_, x.flatten(1)));
  return tapped(fc2_, x);
}

Lstm::Lstm() {
  lstm_ = register_module("lstm", nn::LSTM(nn::LSTMOptions(28, 128).batch_first(true)));
  head_ = register_module("head", nn::Linear(128, 10));
}

torch::Tensor Lstm::forward(torch::Tensor images) {
  const auto rows = images.flatten(1, 2);  // [batch, 28 rows, 28 pixels]
  auto output = std::get<0>(lstm_(rows));  // [batch, 28, 128]
  return head_(output.select(1, -1));      // the state after the last row
}

std::shared_ptr<Classifier> make_model(const std::string& name) {
  if (name == "mlp") return std::make_shared<Mlp>();
  if (name == "cnn") return std::make_shared<Cnn>();
  if (name == "lstm") return std::make_shared<Lstm>();
  throw Error("unknown model '" + name + "': choose one of " + join(model_names(), ", "));
}

std::vector<data::LayerInfo> parameter_layers(const torch::nn::Module& model) {
  std::vector<data::LayerInfo> layers;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    const auto sizes = item.value().sizes();
    layers.push_back({item.key(), std::vector<std::int64_t>(sizes.begin(), sizes.end())});
  }
  return layers;
}

TensorDataset fashion_mnist_tensors(const std::string& split, const std::filesystem::path& dir) {
  auto set = data::load_fashion_mnist(split, dir);
  const auto& img = set.images;
  GS_ASSERT(static_cast<std::int64_t>(img.pixels.size()) == img.count * img.rows * img.cols);
  GS_ASSERT(static_cast<std::int64_t>(set.labels.labels.size()) == img.count);
  // from_blob borrows the vectors; the conversions below copy before they go out of scope.
  auto pixels = torch::from_blob(set.images.pixels.data(), {img.count, 1, img.rows, img.cols}, torch::kUInt8);
  auto images = pixels.to(torch::kFloat32).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd);
  auto labels = torch::from_blob(set.labels.labels.data(), {img.count}, torch::kUInt8).to(torch::kInt64);
  return {images.contiguous(), labels.contiguous()};
}

}  // namespace gs::train
