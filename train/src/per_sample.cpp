// Per-sample gradient variance of Linear and Conv2d layers (see per_sample.hpp for the identities).
#include "gs/train/per_sample.hpp"

#include <cstring>
#include <map>

#include "gs/base/error.hpp"

namespace gs::train {

namespace F = torch::nn::functional;

namespace {
Error unsupported(const std::string& why) { return Error("the variance compressor supports mlp and cnn: " + why); }
}  // namespace

GradientVariance::GradientVariance(Classifier& model) : model_(model) {
  if (model.tap())
    throw Error(
        "gradient variance: the model already has a layer tap attached; use one "
        "GradientVariance per model at a time");
  // Which layer (and whether as bias) owns each parameter, by tensor identity.
  std::map<const void*, std::pair<std::size_t, bool>> owner;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const torch::nn::Module* m = item.value().get();
    torch::Tensor w, b;
    const torch::nn::Conv2dImpl* conv = nullptr;
    if (const auto* lin = dynamic_cast<const torch::nn::LinearImpl*>(m)) {
      w = lin->weight;
      b = lin->bias;
    } else if (const auto* c = dynamic_cast<const torch::nn::Conv2dImpl*>(m)) {
      const auto& o = c->options;
      if (o.groups() != 1 || !c10::get_if<torch::enumtype::kZeros>(&o.padding_mode()) ||
          !c10::get_if<torch::ExpandingArray<2>>(&o.padding()))
        throw unsupported("Conv2d layer '" + item.key() +
                          "' uses groups, a non-zero padding mode or 'same'/'valid' padding");
      w = c->weight;
      b = c->bias;
      conv = c;
    } else {
      continue;
    }
    layers_.push_back({item.key(), m, conv, {}, {}});
    owner[w.unsafeGetTensorImpl()] = {layers_.size() - 1, false};
    if (b.defined()) owner[b.unsafeGetTensorImpl()] = {layers_.size() - 1, true};
  }
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    if (!p.value().requires_grad()) continue;
    const auto it = owner.find(p.value().unsafeGetTensorImpl());
    if (it == owner.end())
      throw unsupported("parameter '" + p.key() + "' is not the weight or bias of a Linear or Conv2d layer");
    slots_.push_back({it->second.first, it->second.second, p.value().numel()});
    numel_ += p.value().numel();
  }
  model.attach_tap(this);
}

GradientVariance::~GradientVariance() {
  if (model_.tap() == this) model_.attach_tap(nullptr);
}

void GradientVariance::record(const torch::nn::Module& layer, const torch::Tensor& input, const torch::Tensor& output) {
  // Evaluation and no-grad forwards have no backward to follow: nothing to keep.
  if (!output.requires_grad()) return;
  for (auto& l : layers_)
    if (l.module == &layer) {
      l.input = input.detach();
      l.output = output;
      output.retain_grad();  // delta of this layer, filled by backward()
      return;
    }
}

std::pair<torch::Tensor, torch::Tensor> GradientVariance::layer_variance(const Layer& l) const {
  torch::NoGradGuard no_grad;
  const auto& x = l.input;
  const auto d = l.output.grad();
  if (!l.conv) {
    if (x.dim() != 2)
      throw unsupported("Linear layer '" + l.name + "' got a " + std::to_string(x.dim()) +
                        "-D input; only [batch, features] inputs give one gradient row per sample");
    const auto d2 = d * d;
    return {d2.t().mm(x * x), d2.sum(0)};
  }
  if (x.dim() != 4) throw unsupported("Conv2d layer '" + l.name + "' got an input that is not 4-D");
  const auto& c = *l.conv;
  const auto& o = c.options;
  // im2col: columns in (in channel, kernel row, kernel column) order, the weight's own layout.
  const auto u = F::unfold(x, F::UnfoldFuncOptions(o.kernel_size())
                                  .dilation(o.dilation())
                                  .padding(*c10::get_if<torch::ExpandingArray<2>>(&o.padding()))
                                  .stride(o.stride()));   // [B, Cin kh kw, L]
  const auto dd = d.reshape({d.size(0), d.size(1), -1});  // [B, Cout, L]
  GS_ASSERT(dd.size(2) == u.size(2));
  const auto g = torch::bmm(dd, u.transpose(1, 2));  // per-sample weight gradients / B
  const auto s = dd.sum(2);                          // per-sample bias gradients / B
  return {(g * g).sum(0).reshape(c.weight.sizes()), (s * s).sum(0)};
}

void GradientVariance::compute(std::vector<float>& v) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> per_layer(layers_.size());
  for (const Slot& s : slots_) {
    if (per_layer[s.layer].first.defined()) continue;
    const Layer& l = layers_[s.layer];
    if (!l.output.defined())
      throw Error("gradient variance: layer '" + l.name +
                  "' was not seen in a forward() with gradients since the last compute(): run "
                  "forward() and backward() of the batch first");
    if (!l.output.grad().defined())
      throw Error("gradient variance: layer '" + l.name +
                  "' has no output gradient: call backward() of the loss before compute()");
    per_layer[s.layer] = layer_variance(l);
  }
  v.resize(std::size_t(numel_));
  std::size_t at = 0;
  for (const Slot& s : slots_) {
    const auto& t = s.bias ? per_layer[s.layer].second : per_layer[s.layer].first;
    const auto c = t.to(torch::kFloat32).contiguous();
    GS_ASSERT(c.numel() == s.numel);
    std::memcpy(v.data() + at, c.data_ptr<float>(), std::size_t(s.numel) * sizeof(float));
    at += std::size_t(s.numel);
  }
  for (auto& l : layers_) l.input = l.output = torch::Tensor();  // used up; frees the batch
}

std::vector<float> GradientVariance::compute() {
  std::vector<float> v;
  compute(v);
  return v;
}

}  // namespace gs::train
