// Choosing and reading one vector of a snapshot, layer kinds, and the JSON of a fitting report.
#include "gs/analyzer/vectors.hpp"

#include <cmath>

#include "gs/error.hpp"

namespace gs::analyzer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string layer_kind(const data::LayerInfo& layer) {
  if (ends_with(layer.name, "bias")) return kKindBias;
  const auto rank = layer.shape.size();
  if (rank >= 3) return kKindConv;
  if (rank == 2) return kKindLinear;
  if (rank == 1) return kKindVector;
  return kKindScalar;
}

VectorChoice choose_vector(const data::SnapshotReader& reader, std::optional<std::int64_t> step,
                           const std::optional<std::string>& layer) {
  if (reader.step_count() == 0)
    throw Error(reader.path().string() + ": the snapshot holds no recorded step yet");
  VectorChoice c;
  c.step_index = step ? reader.step_index(*step) : reader.step_count() - 1;
  c.step = reader.steps()[c.step_index].step;
  if (layer) {
    const auto& info = reader.layers()[reader.layer_index(*layer)];
    c.scope = info.name;
    c.kind = layer_kind(info);
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
      tail.push_back({{"ratio", t.density}, {"threshold", number(t.threshold)},
                      {"predicted", t.predicted}, {"observed", t.observed}});
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
      j["stages"] = t.result.stages;
      j["threshold"] = number(t.result.threshold);
      j["selected"] = t.result.selected;
      j["quality"] = number(t.result.quality);
    }
    thresholds.push_back(std::move(j));
  }
  return {{"n", r.n},         {"excluded", r.excluded}, {"zeros", r.zeros},
          {"nonfinite", r.nonfinite}, {"fits", std::move(fits)}, {"thresholds", std::move(thresholds)}};
}

nlohmann::ordered_json fit_json(const fitting::FitReport& report, const std::string& input,
                                const std::string& backend, const std::string& device_error) {
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
