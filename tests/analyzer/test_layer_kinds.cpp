// Layer kinds (docs/analysis-format.md, "Layer kinds"): one case per rule, from names and shapes
// alone, the first matching rule winning.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "gs/analyzer/vectors.hpp"

namespace gs::analyzer {
namespace {

std::map<std::string, std::string> kinds_of(const std::vector<data::LayerInfo>& layers) {
  std::map<std::string, std::string> out;
  const auto kinds = layer_kinds(layers);
  for (std::size_t i = 0; i < layers.size(); ++i) out[layers[i].name] = kinds[i];
  return out;
}

TEST(LayerKinds, RankZeroIsAScalar) {
  EXPECT_EQ(kinds_of({{"temperature", {}}, {"head.bias", {}}})["head.bias"], kKindScalar);
}

TEST(LayerKinds, ANameWithoutWeightOrBiasIsAFreeStandingParameter) {
  const auto k = kinds_of({{"pos_embedding", {1, 197, 768}}, {"cls_token", {1, 1, 768}}, {"encoder.scale", {64}}});
  EXPECT_EQ(k.at("pos_embedding"), kKindParameter);
  EXPECT_EQ(k.at("cls_token"), kKindParameter);
  EXPECT_EQ(k.at("encoder.scale"), kKindParameter);
}

TEST(LayerKinds, ANormsShiftIsANormBias) {
  const auto k = kinds_of({{"layer1.0.bn2.weight", {64}},
                           {"layer1.0.bn2.bias", {64}},
                           {"encoder.norm1.bias", {512}},
                           {"ln_f.bias", {768}},
                           {"features.1.weight", {32}},
                           {"features.1.bias", {32}}});
  for (const char* name : {"layer1.0.bn2.bias", "encoder.norm1.bias", "ln_f.bias", "features.1.bias"})
    EXPECT_EQ(k.at(name), kKindNormBias) << name;
}

TEST(LayerKinds, OtherBiasesAreBiases) {
  const auto k = kinds_of({{"fc.weight", {10, 64}},
                           {"fc.bias", {10}},
                           {"lstm.weight_ih_l0", {64, 8}},
                           {"lstm.bias_ih_l0", {64}},
                           {"lstm.bias_hh_l0_reverse", {64}},
                           {"attn.in_proj_bias", {96}},
                           {"conv.weight", {4, 2, 3, 3}},
                           {"conv.bias", {4}}});
  for (const char* name : {"fc.bias", "lstm.bias_ih_l0", "lstm.bias_hh_l0_reverse", "attn.in_proj_bias", "conv.bias"})
    EXPECT_EQ(k.at(name), kKindBias) << name;
}

TEST(LayerKinds, ANormsScaleIsANormWeight) {
  // By the module's name, or by a 1-d weight with a bias of its shape whatever the name.
  const auto k = kinds_of({{"bn1.weight", {16}},
                           {"LayerNorm.weight", {768}},
                           {"ln_1.weight", {768}},
                           {"gn.weight", {32}},
                           {"rms_norm.weight", {512}},
                           {"downsample.1.weight", {128}},
                           {"downsample.1.bias", {128}}});
  for (const char* name :
       {"bn1.weight", "LayerNorm.weight", "ln_1.weight", "gn.weight", "rms_norm.weight", "downsample.1.weight"})
    EXPECT_EQ(k.at(name), kKindNormWeight) << name;
}

TEST(LayerKinds, OtherRankOneWeightsAreOneDWeights) {
  // PReLU's weight has no bias; "lnx" and "bnorm_free"-like names that only start alike do not count.
  const auto k = kinds_of({{"act.weight", {8}}, {"lnx.weight", {8}}, {"blend.weight", {8}}, {"blend.bias", {4}}});
  EXPECT_EQ(k.at("act.weight"), kKindVector);
  EXPECT_EQ(k.at("lnx.weight"), kKindVector);
  EXPECT_EQ(k.at("blend.weight"), kKindVector);  // a bias of another shape: no affine norm
}

TEST(LayerKinds, ARankTwoWeightOfAnEmbeddingModuleIsAnEmbedding) {
  const auto k = kinds_of({{"embedding.weight", {1000, 64}},
                           {"model.embed_tokens.weight", {32000, 4096}},
                           {"transformer.wte.weight", {50257, 768}},
                           {"tok_emb.weight", {100, 16}}});
  for (const auto& [name, kind] : k) EXPECT_EQ(kind, kKindEmbedding) << name;
}

TEST(LayerKinds, WeightsOfRankThreeOrMoreAreConvWeights) {
  EXPECT_EQ(kinds_of({{"conv1.weight", {8, 3, 5, 5}}, {"conv1d.weight", {8, 3, 5}}})["conv1d.weight"], kKindConv);
}

TEST(LayerKinds, OtherRankTwoWeightsAreLinearWeights) {
  const auto k = kinds_of({{"fc.weight", {10, 64}},
                           {"lstm.weight_hh_l0", {64, 16}},
                           {"self_attn.in_proj_weight", {96, 32}},
                           {"self_attn.out_proj.weight", {32, 32}}});
  for (const auto& [name, kind] : k) EXPECT_EQ(kind, kKindLinear) << name;
}

TEST(LayerKinds, EveryKindHasItsPlaceInTheReportsOrder) {
  for (const char* kind : {kKindConv, kKindLinear, kKindEmbedding, kKindVector, kKindNormWeight, kKindNormBias,
                           kKindBias, kKindParameter, kKindScalar, kKindModel})
    EXPECT_NE(std::find(layer_kind_order().begin(), layer_kind_order().end(), kind), layer_kind_order().end()) << kind;
}

}  // namespace
}  // namespace gs::analyzer
