// Choosing and reading one vector of a snapshot, layer kinds, and the JSON of a fitting report.
#include "gs/analyzer/vectors.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "gs/base/error.hpp"

namespace gs::analyzer {
namespace {

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
// "weight", "weight_ih_l0", "in_proj_weight" for role "weight".
bool named_as(const std::string& leaf, const std::string& role) {
  return leaf == role || starts_with(leaf, role + "_") || ends_with(leaf, "_" + role);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// A parameter's name as its module's last part, lower case, and its own name: "layer1.0.bn2.weight"
// is ("bn2", "weight"); a name without dots has no module.
struct NameParts {
  std::string module_path, module, leaf;
};
NameParts parts(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return {"", "", name};
  const std::string path = name.substr(0, dot);
  const auto before = path.rfind('.');
  return {path, lower(before == std::string::npos ? path : path.substr(before + 1)), name.substr(dot + 1)};
}

// "bn", "bn1", "ln_f": a short norm name, alone or followed by digits or '_'.
bool short_norm_name(const std::string& module, const std::string& prefix) {
  if (!starts_with(module, prefix)) return false;
  return module.size() == prefix.size() || std::isdigit(static_cast<unsigned char>(module[prefix.size()])) ||
         module[prefix.size()] == '_';
}
bool norm_module_name(const std::string& module) {
  return module.find("norm") != std::string::npos || short_norm_name(module, "bn") || short_norm_name(module, "ln") ||
         short_norm_name(module, "gn");
}
bool embedding_module_name(const std::string& module) {
  return module.find("emb") != std::string::npos || module == "wte" || module == "wpe";
}

std::string kind_of(const data::LayerInfo& layer, const NameParts& p, bool norm) {
  const auto rank = layer.shape.size();
  if (rank == 0) return kKindScalar;
  const bool weight = named_as(p.leaf, "weight"), bias = named_as(p.leaf, "bias");
  if (!weight && !bias) return kKindParameter;
  if (bias) return norm && rank == 1 ? kKindNormBias : kKindBias;
  if (rank == 1) return norm ? kKindNormWeight : kKindVector;
  if (rank == 2 && embedding_module_name(p.module)) return kKindEmbedding;
  return rank >= 3 ? kKindConv : kKindLinear;
}

}  // namespace

const std::vector<std::string>& layer_kind_order() {
  static const std::vector<std::string> order = {kKindConv,       kKindLinear,   kKindEmbedding, kKindVector,
                                                 kKindNormWeight, kKindNormBias, kKindBias,      kKindParameter,
                                                 kKindScalar,     kKindModel};
  return order;
}

std::vector<std::string> layer_kinds(const std::vector<data::LayerInfo>& layers) {
  // A module whose "weight" and "bias" are both 1-d and of one shape is an affine norm (BatchNorm,
  // LayerNorm, GroupNorm), whatever its name (torchvision's downsample.1).
  std::map<std::string, std::vector<const data::LayerInfo*>> by_module;
  std::vector<NameParts> named;
  for (const auto& l : layers) {
    named.push_back(parts(l.name));
    by_module[named.back().module_path].push_back(&l);
  }
  auto affine_pair = [&](const std::string& path) {
    const data::LayerInfo *w = nullptr, *b = nullptr;
    for (const auto* l : by_module[path]) {
      const std::string leaf = parts(l->name).leaf;
      if (leaf == "weight") w = l;
      if (leaf == "bias") b = l;
    }
    return w && b && w->shape.size() == 1 && w->shape == b->shape;
  };
  std::vector<std::string> kinds;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const bool norm = norm_module_name(named[i].module) || affine_pair(named[i].module_path);
    kinds.push_back(kind_of(layers[i], named[i], norm));
  }
  return kinds;
}

VectorChoice choose_vector(const data::SnapshotReader& reader, std::optional<std::int64_t> step,
                           const std::optional<std::string>& layer) {
  if (reader.step_count() == 0) throw Error(reader.path().string() + ": the snapshot holds no recorded step yet");
  VectorChoice c;
  c.step_index = step ? reader.step_index(*step) : reader.step_count() - 1;
  c.step = reader.steps()[c.step_index].step;
  if (layer) {
    const std::size_t index = reader.layer_index(*layer);
    c.scope = reader.layers()[index].name;
    c.kind = layer_kinds(reader.layers())[index];
  } else {
    c.scope = kModelScope;
    c.kind = kKindModel;
  }
  return c;
}

std::vector<float> read_vector(const data::SnapshotReader& reader, const VectorChoice& choice) {
  if (choice.scope == kModelScope) return reader.read_model(choice.step_index);
  return reader.read(choice.step_index, reader.layer_index(choice.scope));
}

nlohmann::ordered_json fit_report_json(const fitting::FitReport& r) {
  using json = nlohmann::ordered_json;  // keys in the documented order, not sorted
  // JSON has no NaN or infinity: they become null.
  const auto number = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  json fits = json::array();
  for (const auto& f : r.fits) {
    json j{{"dist", f.dist}};
    if (!f.error.empty()) {
      j["error"] = f.error;
      fits.push_back(std::move(j));
      continue;
    }
    json params = json::object();
    for (const auto& [name, value] : f.params) params[name] = number(value);
    json tail = json::array();
    for (const auto& t : f.tail)
      tail.push_back({{"ratio", t.density},
                      {"threshold", number(t.threshold)},
                      {"predicted", t.predicted},
                      {"observed", t.observed}});
    json qq = json::array();
    for (const auto& q : f.qq)
      qq.push_back({{"p", q.probability}, {"fitted", number(q.fitted)}, {"sample", number(q.sample)}});
    j["params"] = std::move(params);
    j["loglik"] = number(f.loglik);
    j["aic"] = number(f.aic);
    j["ks_D"] = number(f.ks_D);
    j["ks_p"] = number(f.ks_p);
    j["ad_A2"] = number(f.ad_A2);
    j["ks_n"] = f.ks_n;
    j["ks_subsampled"] = f.ks_subsampled;
    j["tail"] = std::move(tail);
    j["qq"] = std::move(qq);
    fits.push_back(std::move(j));
  }
  json thresholds = json::array();
  for (const auto& t : r.thresholds) {
    json j{{"method", t.result.method}, {"ratio", t.result.density}};
    if (!t.error.empty()) {
      j["error"] = t.error;
    } else {
      j["stages"] = t.result.stages > 0 ? json(t.result.stages) : json();  // none: top-k, DGC
      j["threshold"] = number(t.result.threshold);
      j["selected"] = t.result.selected;
      j["quality"] = number(t.result.quality);
    }
    thresholds.push_back(std::move(j));
  }
  return {{"n", r.n},
          {"excluded", r.excluded},
          {"zeros", r.zeros},
          {"nonfinite", r.nonfinite},
          {"fits", std::move(fits)},
          {"thresholds", std::move(thresholds)}};
}

nlohmann::ordered_json fit_json(const fitting::FitReport& report, const std::string& input, const std::string& backend,
                                const std::string& device_error) {
  const nlohmann::ordered_json body = fit_report_json(report);
  nlohmann::ordered_json j;
  for (const char* key : {"n", "excluded", "zeros", "nonfinite"}) j[key] = body.at(key);
  j["input"] = input;
  j["backend"] = backend;
  if (!device_error.empty()) j["device_error"] = device_error;
  for (const char* key : {"fits", "thresholds"}) j[key] = body.at(key);
  return j;
}

}  // namespace gs::analyzer
