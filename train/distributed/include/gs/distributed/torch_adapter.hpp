#pragma once
// The thin bridge between torch tensors and gs::compress, which knows only float buffers: a model's
// trainable parameters as TensorSpecs, their gradients and values copied flat (in
// named_parameters() order) and back, and one-tensor compression.
#include <torch/torch.h>

#include <span>
#include <string>
#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/compress/grouping.hpp"

namespace gs::distributed {

std::vector<compress::TensorSpec> tensor_specs(const torch::nn::Module& model);
// Gradients of every trainable parameter, concatenated (an undefined gradient counts as zeros).
void flatten_grads(const torch::nn::Module& model, std::vector<float>& flat);
// Sets every trainable parameter's gradient from flat (sizes as tensor_specs()).
void assign_grads(torch::nn::Module& model, std::span<const float> flat);
void flatten_params(const torch::nn::Module& model, std::vector<float>& flat);
void assign_params(torch::nn::Module& model, std::span<const float> flat);

// Compresses one tensor (any float32 CPU tensor; copied to contiguous if needed).
compress::Compressed compress_tensor(compress::Compressor& c, const torch::Tensor& t, const std::string& name);

}  // namespace gs::distributed
