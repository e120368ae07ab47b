#include "gs/distributed/torch_adapter.hpp"

#include <cstring>

#include "gs/base/error.hpp"

namespace gs::distributed {

namespace {
std::vector<std::pair<std::string, torch::Tensor>> trainable(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters(true))
    if (p.value().requires_grad()) out.emplace_back(p.key(), p.value());
  return out;
}
void check_size(std::size_t have, std::size_t want, const char* what) {
  if (have != want)
    throw Error(std::string(what) + ": " + std::to_string(have) + " floats for a model of " + std::to_string(want));
}
}  // namespace

std::vector<compress::TensorSpec> tensor_specs(const torch::nn::Module& model) {
  std::vector<compress::TensorSpec> specs;
  for (const auto& [name, t] : trainable(model)) specs.push_back({name, std::uint64_t(t.numel())});
  return specs;
}

void flatten_grads(const torch::nn::Module& model, std::vector<float>& flat) {
  flat.clear();
  for (const auto& [name, t] : trainable(model)) {
    const auto g = t.grad();
    if (!g.defined()) {
      flat.insert(flat.end(), std::size_t(t.numel()), 0.0f);
      continue;
    }
    const auto c = g.to(torch::kFloat32).contiguous();
    const float* p = c.data_ptr<float>();
    flat.insert(flat.end(), p, p + c.numel());
  }
}

void assign_grads(torch::nn::Module& model, std::span<const float> flat) {
  std::size_t at = 0;
  torch::NoGradGuard guard;
  for (auto& [name, t] : trainable(model)) {
    const auto n = std::size_t(t.numel());
    check_size(flat.size() < at + n ? flat.size() : at + n, at + n, "assign_grads");
    auto src = torch::from_blob(const_cast<float*>(flat.data() + at), t.sizes(), torch::kFloat32);
    if (!t.grad().defined()) t.mutable_grad() = torch::zeros_like(t);
    t.mutable_grad().copy_(src);
    at += n;
  }
  check_size(flat.size(), at, "assign_grads");
}

void flatten_params(const torch::nn::Module& model, std::vector<float>& flat) {
  flat.clear();
  for (const auto& [name, t] : trainable(model)) {
    const auto c = t.detach().to(torch::kFloat32).contiguous();
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
}

void assign_params(torch::nn::Module& model, std::span<const float> flat) {
  std::size_t at = 0;
  torch::NoGradGuard guard;
  for (auto& [name, t] : trainable(model)) {
    const auto n = std::size_t(t.numel());
    check_size(flat.size() < at + n ? flat.size() : at + n, at + n, "assign_params");
    t.copy_(torch::from_blob(const_cast<float*>(flat.data() + at), t.sizes(), torch::kFloat32));
    at += n;
  }
  check_size(flat.size(), at, "assign_params");
}

compress::Compressed compress_tensor(compress::Compressor& c, const torch::Tensor& t, const std::string& name) {
  if (t.device().type() != torch::kCPU || t.scalar_type() != torch::kFloat32)
    throw Error("compress_tensor: '" + name + "' must be a float32 CPU tensor");
  const auto flat = t.contiguous();
  return c.compress(std::span<const float>(flat.data_ptr<float>(), std::size_t(flat.numel())), name);
}

}  // namespace gs::distributed
