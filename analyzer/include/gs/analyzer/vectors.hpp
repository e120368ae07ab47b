#pragma once
// Which vector of a snapshot to analyse (one layer, or the whole model flattened) and what kind of
// parameter a layer is. Shared by `gradscope fit` (one step) and `gradscope analyze` (every step).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gs/data/snapshot.hpp"
#include "gs/fitting/report.hpp"

namespace gs::analyzer {

// Scope name of the whole model flattened (layers concatenated in the snapshot's order). Layer
// names come from parameter names, which never hold parentheses.
inline constexpr const char* kModelScope = "(model)";

// Layer kinds the report groups by, decided from each parameter's name and shape by the rules of
// docs/analysis-format.md ("Layer kinds"), first match wins:
inline constexpr const char* kKindScalar = "scalar";           // rank 0
inline constexpr const char* kKindParameter = "parameter";     // no weight/bias suffix: pos_embedding
inline constexpr const char* kKindNormBias = "norm bias";      // a norm's shift (bn1.bias)
inline constexpr const char* kKindBias = "bias";               // bias, bias_ih_l0, in_proj_bias
inline constexpr const char* kKindNormWeight = "norm weight";  // a norm's scale (bn1.weight)
inline constexpr const char* kKindVector = "1-d weight";       // other rank-1 weights (PReLU)
inline constexpr const char* kKindEmbedding = "embedding";     // rank 2 of an embedding module
inline constexpr const char* kKindConv = "conv weight";        // rank >= 3
inline constexpr const char* kKindLinear = "linear weight";    // rank 2: linear, LSTM, attention
inline constexpr const char* kKindModel = "whole model";       // kModelScope
// Every kind in the order the report lists them.
const std::vector<std::string>& layer_kind_order();
// The kind of every layer of a model, in the layers' order: the rules look at a layer's module
// too (a module holding a 1-d weight and a bias of its shape is a norm).
std::vector<std::string> layer_kinds(const std::vector<data::LayerInfo>& layers);

// One vector picked from a snapshot.
struct VectorChoice {
  std::size_t step_index = 0;  // row of /steps
  std::int64_t step = 0;       // training step
  std::string scope;           // layer name or kModelScope
  std::string kind;
};

// step: a recorded training step (none: the last one); layer: a layer name (none: whole model).
// gs::Error for an empty snapshot, an unrecorded step or an unknown layer, listing what exists.
VectorChoice choose_vector(const data::SnapshotReader& reader, std::optional<std::int64_t> step,
                           const std::optional<std::string>& layer);
// The chosen vector's values (a layer's, or every layer concatenated).
std::vector<float> read_vector(const data::SnapshotReader& reader, const VectorChoice& choice);

// The JSON of a fitting report (`gradscope fit --json`, docs/analysis-format.md): n, excluded, zeros,
// nonfinite, fits [{dist, params{..}, loglik, aic, ks_D, ks_p, ad_A2, ks_n, ks_subsampled,
// tail[{ratio, threshold, predicted, observed}], qq[{p, fitted, sample}], error?}] and thresholds
// [{method, ratio, stages, threshold, selected, quality, error?}] (ratio: the density; stages null
// for a method that counts none). Non-finite numbers become null.
nlohmann::ordered_json fit_report_json(const fitting::FitReport& report);
// `gradscope fit --json` (and gradscope.fit in Python): the report's JSON with what was read and
// the backend, top-level keys n, excluded, zeros, nonfinite, input, backend, [device_error,] fits,
// thresholds. device_error (only when not empty): the device failure after which the report was
// made again on `backend` (`--on-device-error cpu`).
nlohmann::ordered_json fit_json(const fitting::FitReport& report, const std::string& input, const std::string& backend,
                                const std::string& device_error = {});

}  // namespace gs::analyzer
