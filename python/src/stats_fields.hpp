#pragma once
// The one place that maps gradscope's C++ statistics structs to Python: each struct's fields as
// (name, getter) in the order Python shows them. Every binding builds its dicts with to_dict();
// gradscope.ddp.StepStats is made from step_stats_defaults() (names and default values), so a
// field added to compress::StepStats here reaches both.
#include <pybind11/pybind11.h>

#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/step_rules.hpp"

namespace gs::python {

template <class S>
struct StatField {
  const char* name;
  pybind11::object (*get)(const S&);
};

template <class S>
const std::vector<StatField<S>>& stat_fields();

template <>
inline const std::vector<StatField<compress::StepStats>>& stat_fields<compress::StepStats>() {
  namespace py = pybind11;
  using S = compress::StepStats;
  static const std::vector<StatField<S>> f = {
      {"n", [](const S& s) -> py::object { return py::int_(s.n); }},
      {"selected", [](const S& s) -> py::object { return py::int_(s.selected); }},
      {"target_density", [](const S& s) -> py::object { return py::float_(s.target_density); }},
      {"density", [](const S& s) -> py::object { return py::float_(s.density()); }},
      {"quality", [](const S& s) -> py::object { return py::float_(s.quality()); }},
      {"stages", [](const S& s) -> py::object { return py::int_(s.stages); }},
      {"bytes_sent", [](const S& s) -> py::object { return py::int_(s.bytes_sent); }},
      {"dense_bytes", [](const S& s) -> py::object { return py::int_(s.dense_bytes); }},
      {"gathered_bytes", [](const S& s) -> py::object { return py::int_(s.gathered_bytes); }},
      {"host_device_bytes", [](const S& s) -> py::object { return py::int_(s.host_device_bytes); }},
      {"host_device_gathered_bytes", [](const S& s) -> py::object { return py::int_(s.host_device_gathered_bytes); }},
      {"compress_s", [](const S& s) -> py::object { return py::float_(s.compress_seconds); }},
      {"comm_s", [](const S& s) -> py::object { return py::float_(s.comm_seconds); }},
      {"hook_s", [](const S& s) -> py::object { return py::float_(s.hook_seconds); }},
      {"buckets", [](const S& s) -> py::object { return py::int_(s.buckets); }},
      {"skipped", [](const S& s) -> py::object { return py::bool_(s.skipped); }},
      {"warmup", [](const S& s) -> py::object { return py::bool_(s.warmup); }},
      {"critical", [](const S& s) -> py::object { return py::bool_(s.critical); }}};
  return f;
}

template <>
inline const std::vector<StatField<compress::RunSummary>>& stat_fields<compress::RunSummary>() {
  namespace py = pybind11;
  using S = compress::RunSummary;
  static const std::vector<StatField<S>> f = {
      {"steps", [](const S& s) -> py::object { return py::int_(s.steps); }},
      {"skipped_steps", [](const S& s) -> py::object { return py::int_(s.skipped_steps); }},
      {"critical_steps", [](const S& s) -> py::object { return py::int_(s.critical_steps); }},
      {"density_mean", [](const S& s) -> py::object { return py::float_(s.density_mean); }},
      {"density_mean_all", [](const S& s) -> py::object { return py::float_(s.density_mean_all); }},
      {"quality_mean", [](const S& s) -> py::object { return py::float_(s.quality_mean); }},
      {"quality_p5", [](const S& s) -> py::object { return py::float_(s.quality_p5); }},
      {"quality_p95", [](const S& s) -> py::object { return py::float_(s.quality_p95); }},
      {"bytes_per_step", [](const S& s) -> py::object { return py::float_(s.bytes_per_step); }},
      {"dense_bytes_per_step", [](const S& s) -> py::object { return py::float_(s.dense_bytes_per_step); }},
      {"gathered_bytes_per_step", [](const S& s) -> py::object { return py::float_(s.gathered_bytes_per_step); }},
      {"host_device_bytes_per_step",
       [](const S& s) -> py::object { return py::float_(s.host_device_bytes_per_step); }},
      {"host_device_gathered_bytes_per_step",
       [](const S& s) -> py::object { return py::float_(s.host_device_gathered_bytes_per_step); }},
      {"compress_ms_per_step", [](const S& s) -> py::object { return py::float_(s.compress_ms_per_step); }},
      {"comm_ms_per_step", [](const S& s) -> py::object { return py::float_(s.comm_ms_per_step); }},
      {"hook_ms_per_step", [](const S& s) -> py::object { return py::float_(s.hook_ms_per_step); }}};
  return f;
}

template <>
inline const std::vector<StatField<compress::CompressInfo>>& stat_fields<compress::CompressInfo>() {
  namespace py = pybind11;
  using S = compress::CompressInfo;
  static const std::vector<StatField<S>> f = {
      {"n", [](const S& s) -> py::object { return py::int_(s.n); }},
      {"selected", [](const S& s) -> py::object { return py::int_(s.selected); }},
      {"target_density", [](const S& s) -> py::object { return py::float_(s.target_density); }},
      {"density", [](const S& s) -> py::object { return py::float_(s.density()); }},
      {"quality", [](const S& s) -> py::object { return py::float_(s.quality()); }},
      {"threshold", [](const S& s) -> py::object { return py::float_(s.threshold); }},
      {"stages", [](const S& s) -> py::object { return py::int_(s.stages); }},
      {"nonfinite", [](const S& s) -> py::object { return py::int_(s.nonfinite); }}};
  return f;
}

// The struct as a dict of its fields; `first` > 0 keeps only the first ones.
template <class S>
pybind11::dict to_dict(const S& s, std::size_t first = 0) {
  pybind11::dict d;
  const auto& fields = stat_fields<S>();
  const std::size_t n = first > 0 ? std::min(first, fields.size()) : fields.size();
  for (std::size_t i = 0; i < n; ++i) d[fields[i].name] = fields[i].get(s);
  return d;
}

// A run's summary: its step counts alone while no step counted (every one skipped).
inline pybind11::dict summary_dict(const compress::RunSummary& s) {
  return to_dict(s, s.steps == s.skipped_steps ? 3 : 0);
}

}  // namespace gs::python
