#pragma once
// GradientVariance: from one forward/backward of a mini-batch, the per-element sum over the batch of
// squared per-sample gradients divided by B^2 (the variance of the mini-batch mean gradient that
// the variance compressor weighs elements by; algorithms.md section 6), laid out like the flat
// gradient (trainable parameters in named_parameters() order, as gs::distributed::flatten_grads).
//
// How: the model's forward() shows each Linear/Conv2d layer's input x and output to a LayerTap;
// the output keeps its gradient delta (retain_grad). With a mean-reduced loss delta already carries
// 1/B, so with g_b = B delta_b x_b^T the sum (1/B^2) sum_b g_b^2 needs no B:
//   Linear weight:  (delta o delta)^T (x o x)         bias: sum_b delta_b^2
//   Conv2d weight:  sum_b (delta_b U_b^T)^2, U_b = unfold(x_b) (im2col)   bias: sum_b (sum_l delta_b,l)^2
// Both are exact (no approximation), for any batch. A sum-reduced loss gives B^2 times the value.
//
//   GradientVariance gv(*model);            // attaches to the model, detaches when destroyed
//   auto loss = cross_entropy(model->forward(x), y);  loss.backward();
//   std::vector<float> v = gv.compute();    // then mc.set_gradient_variance(v)
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gs/train/models.hpp"

namespace gs::train {

class GradientVariance final : private LayerTap {
 public:
  // gs::Error unless every trainable parameter is the weight or bias of a Linear or Conv2d layer
  // (Conv2d: groups 1, zero padding given as numbers): "the variance compressor supports mlp and
  // cnn". Also gs::Error when the model has a tap attached already.
  explicit GradientVariance(Classifier& model);
  ~GradientVariance() override;
  GradientVariance(const GradientVariance&) = delete;
  GradientVariance& operator=(const GradientVariance&) = delete;

  // After forward() of a batch with gradients enabled and backward() of its mean-reduced loss:
  // v, one float per trainable parameter element. Uses up that forward's records (gs::Error when
  // a layer was not seen in a forward/backward since the last call).
  void compute(std::vector<float>& v);
  std::vector<float> compute();

 private:
  struct Layer {
    std::string name;  // module name, e.g. "conv1"
    const torch::nn::Module* module = nullptr;
    const torch::nn::Conv2dImpl* conv = nullptr;  // null for Linear
    torch::Tensor input, output;                  // the last forward's, while not yet used
  };
  struct Slot {  // one trainable parameter, in named_parameters() order
    std::size_t layer = 0;
    bool bias = false;
    std::int64_t numel = 0;
  };

  void record(const torch::nn::Module& layer, const torch::Tensor& input, const torch::Tensor& output) override;
  // (weight variance, bias variance) of one layer from its recorded input and output gradient.
  std::pair<torch::Tensor, torch::Tensor> layer_variance(const Layer& l) const;

  Classifier& model_;
  std::vector<Layer> layers_;
  std::vector<Slot> slots_;
  std::int64_t numel_ = 0;
};

}  // namespace gs::train
