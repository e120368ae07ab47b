#pragma once
// The one place that maps gradscope's C++ statistics structs to Python: each struct's fields as
// (name, getter) in the order Python shows them. Every binding builds its dicts with to_dict();
// gradscope.ddp.StepStats is made from step_stats_defaults() (names and default values), so a
// field added to compress::StepStats here reaches both.
#include <pybind11/pybind11.h>

#include <cmath>
#include <initializer_list>
#include <type_traits>
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

// A field's getter from its member (a data member, or a const method such as density()): the
// value as Python's int, float or bool, as pybind11 casts its C++ type.
template <auto M, class S>
pybind11::object get(const S& s) {
  if constexpr (std::is_member_function_pointer_v<decltype(M)>)
    return pybind11::cast((s.*M)());
  else
    return pybind11::cast(s.*M);
}

// The same for a value that may be missing (NaN): None there.
template <auto M, class S>
pybind11::object get_or_none(const S& s) {
  const double v = (s.*M)();
  return std::isnan(v) ? pybind11::none() : pybind11::object(pybind11::float_(v));
}

// The fields a step's statistics and one selection's share, in the same order and under the same
// names, followed by the struct's own.
template <class S>
std::vector<StatField<S>> selection_fields_and(std::initializer_list<StatField<S>> own) {
  std::vector<StatField<S>> f = {{"n", get<&S::n>},
                                 {"selected", get<&S::selected>},
                                 {"target_density", get<&S::target_density>},
                                 {"density", get<&S::density>},
                                 {"quality", get<&S::quality>}};
  f.insert(f.end(), own);
  return f;
}

// A step's exchange by name (ExchangeMode's).
inline pybind11::object exchange_name(const compress::StepStats& s) {
  return pybind11::str(std::string(compress::to_string(compress::ExchangeMode(s.exchange))));
}

template <class S>
const std::vector<StatField<S>>& stat_fields();

template <>
inline const std::vector<StatField<compress::StepStats>>& stat_fields<compress::StepStats>() {
  using S = compress::StepStats;
  static const std::vector<StatField<S>> f =
      selection_fields_and<S>({{"stages", get<&S::stages>},
                               {"corrected", get<&S::corrected>},
                               {"exact", get<&S::exact>},
                               {"estimate_quality", get_or_none<&S::estimate_quality>},
                               {"bytes_sent", get<&S::bytes_sent>},
                               {"dense_bytes", get<&S::dense_bytes>},
                               {"gathered_bytes", get<&S::gathered_bytes>},
                               {"link_bytes", get<&S::link_bytes>},
                               {"host_device_bytes", get<&S::host_device_bytes>},
                               {"host_device_gathered_bytes", get<&S::host_device_gathered_bytes>},
                               {"host_syncs", get<&S::host_syncs>},
                               {"launches", get<&S::launches>},
                               {"single_thread_launches", get<&S::single_thread_launches>},
                               {"allocations", get<&S::allocations>},
                               {"events_created", get<&S::events_created>},
                               {"scratch_queries", get<&S::scratch_queries>},
                               {"elements_passed", get<&S::elements_passed>},
                               {"overflow", get<&S::overflow>},
                               {"compress_s", get<&S::compress_seconds>},
                               {"compress_cpu_s", get<&S::compress_cpu_seconds>},
                               {"comm_s", get<&S::comm_seconds>},
                               {"hook_s", get<&S::hook_seconds>},
                               {"buckets", get<&S::buckets>},
                               {"skipped", get<&S::skipped>},
                               {"warmup", get<&S::warmup>},
                               {"dense", get<&S::dense>},
                               {"critical", get<&S::critical>},
                               {"exchange", &exchange_name}});
  return f;
}

template <>
inline const std::vector<StatField<compress::RunSummary>>& stat_fields<compress::RunSummary>() {
  using S = compress::RunSummary;
  static const std::vector<StatField<S>> f = {
      {"steps", get<&S::steps>},
      {"skipped_steps", get<&S::skipped_steps>},
      {"critical_steps", get<&S::critical_steps>},
      {"density_mean", get<&S::density_mean>},
      {"density_mean_all", get<&S::density_mean_all>},
      {"quality_mean", get<&S::quality_mean>},
      {"quality_p5", get<&S::quality_p5>},
      {"quality_p95", get<&S::quality_p95>},
      {"estimate_in_band", get<&S::estimate_in_band>},
      {"corrected_share", get<&S::corrected_share>},
      {"exact_share", get<&S::exact_share>},
      {"bytes_per_step", get<&S::bytes_per_step>},
      {"dense_bytes_per_step", get<&S::dense_bytes_per_step>},
      {"gathered_bytes_per_step", get<&S::gathered_bytes_per_step>},
      {"link_bytes_per_step", get<&S::link_bytes_per_step>},
      {"host_device_bytes_per_step", get<&S::host_device_bytes_per_step>},
      {"host_device_gathered_bytes_per_step", get<&S::host_device_gathered_bytes_per_step>},
      {"host_syncs_per_step", get<&S::host_syncs_per_step>},
      {"overflow_per_step", get<&S::overflow_per_step>},
      {"compress_ms_per_step", get<&S::compress_ms_per_step>},
      {"comm_ms_per_step", get<&S::comm_ms_per_step>},
      {"hook_ms_per_step", get<&S::hook_ms_per_step>}};
  return f;
}

template <>
inline const std::vector<StatField<compress::CompressInfo>>& stat_fields<compress::CompressInfo>() {
  using S = compress::CompressInfo;
  static const std::vector<StatField<S>> f = selection_fields_and<S>({{"threshold", get<&S::threshold>},
                                                                      {"stages", get<&S::stages>},
                                                                      {"corrected", get<&S::corrected>},
                                                                      {"exact", get<&S::exact>},
                                                                      {"estimate_quality", get<&S::estimate_quality>},
                                                                      {"nonfinite", get<&S::nonfinite>}});
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
