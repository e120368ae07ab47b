#pragma once
// Fashion-MNIST classifiers in the libtorch C++ frontend. Every model takes images as float
// [batch, 1, 28, 28] (normalised, see fashion_mnist_tensors) and returns logits [batch, 10].
// Parameter names are torch's named_parameters() names, e.g. "conv1.weight"; they become the
// layer names of a gradient snapshot.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"
#include "gs/train/model_names.hpp"

namespace gs::train {

// Shown each Linear/Conv2d layer's input and output while forward() runs; per_sample.hpp uses it
// for per-sample gradient statistics (libtorch's C++ modules have no forward hooks).
class LayerTap {
 public:
  virtual ~LayerTap() = default;
  virtual void record(const torch::nn::Module& layer, const torch::Tensor& input, const torch::Tensor& output) = 0;
};

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  // At most one tap at a time; nullptr detaches. The tap must stay alive while attached.
  void attach_tap(LayerTap* tap) { tap_ = tap; }
  LayerTap* tap() const { return tap_; }

 protected:
  // layer(x), shown to the attached tap.
  template <class Layer>
  torch::Tensor tapped(Layer& layer, const torch::Tensor& x) {
    auto y = layer(x);
    if (tap_) tap_->record(*layer, x, y);
    return y;
  }

 private:
  LayerTap* tap_ = nullptr;
};

// 784-256-128-10 with ReLU: fc1, fc2, fc3.
class Mlp final : public Classifier {
 public:
  Mlp();
  torch::Tensor forward(torch::Tensor images) override;

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

// conv1 (1->16, 3x3) + pool, conv2 (16->32, 3x3) + pool, fc1 (1568->128), fc2 (128->10). Small
// enough for an epoch on two CPU cores (`gradscope demo`'s time and test accuracy: README.md,
// "Quick start").
class Cnn final : public Classifier {
 public:
  Cnn();
  torch::Tensor forward(torch::Tensor images) override;

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// Image rows as a 28-step sequence of 28 features: one LSTM layer (hidden 128), a linear head on
// the last step. Parameters: lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_*_l0, head.*.
class Lstm final : public Classifier {
 public:
  Lstm();
  torch::Tensor forward(torch::Tensor images) override;

 private:
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

// Names make_model accepts, in the order --help lists them: model_names() (gs/train/model_names.hpp).
// A fresh model, initialised from torch's global generator (seed it first with torch::manual_seed).
// gs::Error listing the choices for an unknown name.
std::shared_ptr<Classifier> make_model(const std::string& name);

// The trainable parameters (requires_grad) of a module as snapshot layers, in named_parameters()
// order: the layout a GradientRecorder records.
std::vector<data::LayerInfo> parameter_layers(const torch::nn::Module& model);

}  // namespace gs::train
