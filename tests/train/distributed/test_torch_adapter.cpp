#include <gtest/gtest.h>

#include "gs/distributed/torch_adapter.hpp"
#include "gs/base/error.hpp"
#include "gs/train/models.hpp"

using namespace gs::distributed;

TEST(TorchAdapter, FlattenAndAssignRoundTrip) {
  torch::manual_seed(3);
  auto model = gs::train::make_model("mlp");
  const auto specs = tensor_specs(*model);
  ASSERT_EQ(specs.size(), 6u);
  EXPECT_EQ(specs[0].name, "fc1.weight");
  EXPECT_EQ(specs[0].numel, 784u * 256u);
  std::uint64_t total = 0;
  for (const auto& s : specs) total += s.numel;

  std::vector<float> params;
  flatten_params(*model, params);
  ASSERT_EQ(params.size(), total);
  for (auto& v : params) v = v * 2.0f + 1.0f;
  assign_params(*model, params);
  std::vector<float> back;
  flatten_params(*model, back);
  EXPECT_EQ(back, params);

  // Gradients: undefined before backward (zeros), then what assign_grads wrote.
  std::vector<float> grads;
  flatten_grads(*model, grads);
  ASSERT_EQ(grads.size(), total);
  EXPECT_TRUE(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 0.0f; }));
  std::vector<float> g(total);
  for (std::size_t i = 0; i < total; ++i) g[i] = float(i % 97) * 1e-3f - 0.05f;
  assign_grads(*model, g);
  flatten_grads(*model, grads);
  EXPECT_EQ(grads, g);

  const std::vector<float> wrong(total - 1);
  EXPECT_THROW(assign_grads(*model, wrong), gs::Error);
  EXPECT_THROW(assign_params(*model, wrong), gs::Error);
}

TEST(TorchAdapter, CompressTensorMatchesRawBuffers) {
  torch::manual_seed(5);
  const auto t = torch::randn({64, 33});
  auto a = gs::compress::make_compressor("topk", 0.05);
  auto b = gs::compress::make_compressor("topk", 0.05);
  const auto via_tensor = compress_tensor(*a, t.t(), "w");  // non-contiguous view
  const auto c = t.t().contiguous();
  const auto raw = b->compress(std::span<const float>(c.data_ptr<float>(), std::size_t(c.numel())), "w");
  EXPECT_EQ(via_tensor.payload.indices, raw.payload.indices);
  EXPECT_EQ(via_tensor.payload.values, raw.payload.values);
  EXPECT_THROW(compress_tensor(*a, t.to(torch::kFloat64), "w"), gs::Error);
}
