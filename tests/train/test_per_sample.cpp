// GradientVariance against brute force: one backward per sample, squared, summed, / B^2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>

#include "gs/base/error.hpp"
#include "gs/train/models.hpp"
#include "gs/train/per_sample.hpp"

namespace {

using gs::train::GradientVariance;

// Trainable parameters' gradients, flat in named_parameters() order (flatten_grads' layout).
std::vector<double> flat_grads(const torch::nn::Module& m) {
  std::vector<double> out;
  for (const auto& p : m.named_parameters(true)) {
    if (!p.value().requires_grad()) continue;
    const auto g = p.value().grad().to(torch::kFloat64).contiguous();
    out.insert(out.end(), g.data_ptr<double>(), g.data_ptr<double>() + g.numel());
  }
  return out;
}

torch::Tensor mean_loss(gs::train::Classifier& model, const torch::Tensor& x, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(model.forward(x), y);
}

struct Case {
  std::string model;
  torch::Dtype dtype;
  double rel, abs;  // |v - ref| <= rel |ref| + abs max|ref|
};

class PerSample : public ::testing::TestWithParam<Case> {};

TEST_P(PerSample, MatchesOneBackwardPerSample) {
  const Case c = GetParam();
  torch::manual_seed(11);
  auto model = gs::train::make_model(c.model);
  model->to(c.dtype);
  GradientVariance gv(*model);
  const std::int64_t B = 6;
  const auto x = torch::randn({B, 1, 28, 28}, torch::dtype(c.dtype));
  const auto y = torch::randint(0, 10, {B}, torch::kInt64);

  model->zero_grad();
  mean_loss(*model, x, y).backward();
  const auto v = gv.compute();

  std::vector<double> ref;
  for (std::int64_t b = 0; b < B; ++b) {
    model->zero_grad();
    mean_loss(*model, x.slice(0, b, b + 1), y.slice(0, b, b + 1)).backward();
    const auto g = flat_grads(*model);
    if (ref.empty()) ref.assign(g.size(), 0.0);
    for (std::size_t i = 0; i < g.size(); ++i) ref[i] += g[i] * g[i];
  }
  for (double& r : ref) r /= double(B * B);

  ASSERT_EQ(v.size(), ref.size());
  const double top = *std::max_element(ref.begin(), ref.end());
  ASSERT_GT(top, 0.0);
  std::size_t nonzero = 0;
  double worst = 0.0;  // largest |v - ref| / (rel |ref| + abs top), reported for the record
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double tol = c.rel * std::fabs(ref[i]) + c.abs * top;
    worst = std::max(worst, std::fabs(v[i] - ref[i]) / tol);
    ASSERT_LE(std::fabs(v[i] - ref[i]), tol) << c.model << " i " << i << " ref " << ref[i];
    nonzero += ref[i] > 0.0;
  }
  EXPECT_GT(nonzero, v.size() / 4) << "too few elements tested";
  std::cout << c.model << " " << (c.dtype == torch::kFloat64 ? "f64" : "f32") << ": " << v.size() << " elements, "
            << nonzero << " non-zero, worst error / tolerance " << worst << "\n";
}

// float64 models: exact up to the float32 output (rounding 6e-8 relative; measured worst 6% of the
// tolerance). float32 models: the batched and per-sample paths sum in different orders (measured
// worst about 4% of the tolerance).
INSTANTIATE_TEST_SUITE_P(
    Models, PerSample,
    ::testing::Values(Case{"mlp", torch::kFloat64, 1e-6, 1e-12}, Case{"cnn", torch::kFloat64, 1e-6, 1e-12},
                      Case{"mlp", torch::kFloat32, 1e-4, 1e-7}, Case{"cnn", torch::kFloat32, 1e-4, 1e-7}),
    [](const auto& info) { return info.param.model + (info.param.dtype == torch::kFloat64 ? "_f64" : "_f32"); });

TEST(PerSampleErrors, UnsupportedModelsAndMisuseThrow) {
  torch::manual_seed(3);
  auto lstm = gs::train::make_model("lstm");
  try {
    GradientVariance gv(*lstm);
    FAIL() << "no error for lstm";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the variance compressor supports mlp and cnn"), std::string::npos);
  }
  EXPECT_EQ(lstm->tap(), nullptr);

  auto mlp = gs::train::make_model("mlp");
  const auto x = torch::randn({4, 1, 28, 28});
  const auto y = torch::randint(0, 10, {4}, torch::kInt64);
  {
    GradientVariance gv(*mlp);
    EXPECT_THROW(GradientVariance second(*mlp), gs::Error);  // one tap per model
    EXPECT_THROW(gv.compute(), gs::Error);                   // no forward yet
    {
      torch::NoGradGuard no_grad;  // evaluation: nothing recorded
      mlp->forward(x);
    }
    EXPECT_THROW(gv.compute(), gs::Error);
    auto loss = mean_loss(*mlp, x, y);
    EXPECT_THROW(gv.compute(), gs::Error);  // forward without backward
    loss.backward();
    const auto v = gv.compute();
    EXPECT_EQ(v.size(), std::size_t(784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10));
    EXPECT_THROW(gv.compute(), gs::Error);  // the records are used up
  }
  EXPECT_EQ(mlp->tap(), nullptr);  // detached by the destructor
}

}  // namespace
