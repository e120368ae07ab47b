// GradientRecorder: libtorch hooks feeding a gs::data::StepRecorder.
#include "gs/train/recorder.hpp"

#include <algorithm>

#include "gs/base/error.hpp"
#include "gs/train/models.hpp"

namespace gs::train {

namespace {

bool same_layers(const std::vector<data::LayerInfo>& a, const std::vector<data::LayerInfo>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const auto& x, const auto& y) { return x.name == y.name && x.shape == y.shape; });
}

}  // namespace

GradientRecorder::GradientRecorder(torch::nn::Module& model, data::SnapshotWriter writer, RecorderOptions options)
    : GradientRecorder(
          model,
          [&]() {
            if (!same_layers(writer.layers(), parameter_layers(model)))
              throw Error("snapshot " + writer.path().string() +
                          " was created for other layers than the model's "
                          "parameters: create it with parameter_layers(model)");
            return snapshot_sink(std::move(writer));
          }(),
          options) {}

GradientRecorder::GradientRecorder(torch::nn::Module& model, std::unique_ptr<StepSink> sink, RecorderOptions options)
    : core_(parameter_layers(model), std::move(sink), options) {
  std::size_t index = 0;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    torch::Tensor param = item.value();
    const std::size_t layer = index++;
    const unsigned handle = param.register_hook([this, layer](torch::Tensor grad) {
      if (!core_.capturing()) return;
      // Gradients of CPU float parameters are used as they are; others are staged to host float32.
      const auto host = grad.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      core_.put(layer, std::span<const float>(host.data_ptr<float>(), std::size_t(host.numel())));
    });
    hooks_.emplace_back(param, handle);
  }
}

GradientRecorder::~GradientRecorder() {
  for (auto& [param, handle] : hooks_) param.remove_hook(handle);
}

data::SnapshotWriter fashion_mnist_snapshot(const std::string& path, const std::string& model, std::uint64_t seed,
                                            const std::vector<data::LayerInfo>& layers,
                                            const data::WriterOptions& options) {
  data::SnapshotMeta meta;
  meta.model = model;
  meta.dataset = "fashion-mnist";
  meta.seed = seed;
  return data::SnapshotWriter(path, meta, layers, options);
}

}  // namespace gs::train
