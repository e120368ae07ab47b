// Field lists and row packing of the analysis tables (docs/analysis-format.md).
#include "store_tables.hpp"

namespace gs::analyzer::tables {
namespace {
using h5::Field;
using h5::FieldType;
Field i64(const char* n) { return {n, FieldType::i64, 0}; }
Field u64(const char* n) { return {n, FieldType::u64, 0}; }
Field f64(const char* n) { return {n, FieldType::f64, 0}; }
Field str(const char* n, std::size_t w) { return {n, FieldType::str, w}; }
}  // namespace

Widths read_widths(hid_t file_id, const std::filesystem::path& file) {
  Widths w;
  w.scope = h5::stored_width(file_id, kFits, "scope", file);
  w.kind = h5::stored_width(file_id, kFits, "kind", file);
  w.dist = h5::stored_width(file_id, kFits, "dist", file);
  w.method = h5::stored_width(file_id, kThresholds, "method", file);
  w.error = h5::stored_width(file_id, kFits, "error", file);
  return w;
}

std::vector<Field> step_column() { return {i64("step")}; }

std::vector<Field> step_fields() {
  return {i64("step"), u64("row"), f64("loss"), f64("lr"), f64("seconds")};
}
std::vector<Field> vector_fields(const Widths& w) {
  return {i64("step"), str("scope", w.scope), str("kind", w.kind), u64("n"), u64("zeros"),
          u64("nonfinite"), f64("fit_seconds")};
}
std::vector<Field> fit_fields(const Widths& w) {
  return {i64("step"),   str("scope", w.scope), str("kind", w.kind), str("dist", w.dist),
          f64("param1"), f64("param2"),         f64("loglik"),       f64("aic"),
          f64("ks_D"),   f64("ks_p"),           f64("ad_A2"),        u64("ks_n"),
          {"ks_subsampled", FieldType::u8, 0},  str("error", w.error)};
}
std::vector<Field> tail_fields(const Widths& w) {
  return {i64("step"),      str("scope", w.scope), str("dist", w.dist), f64("ratio"),
          f64("threshold"), f64("predicted"),      u64("observed")};
}
std::vector<Field> qq_fields(const Widths& w) {
  return {i64("step"), str("scope", w.scope), str("dist", w.dist), f64("probability"),
          f64("fitted"), f64("sample")};
}
std::vector<Field> threshold_fields(const Widths& w) {
  return {i64("step"),      str("scope", w.scope),      str("kind", w.kind), str("method", w.method),
          f64("ratio"),     f64("threshold"),           {"stages", FieldType::i32, 0},
          u64("selected"),  f64("quality"),             f64("exact_threshold"),
          f64("rel_error"), f64("seconds"),             str("error", w.error)};
}

std::vector<Field> fields_of(const std::string& table, const Widths& w) {
  if (table == kSteps) return step_fields();
  if (table == kVectors) return vector_fields(w);
  if (table == kFits) return fit_fields(w);
  if (table == kTails) return tail_fields(w);
  if (table == kQQ) return qq_fields(w);
  if (table == kThresholds) return threshold_fields(w);
  std::string names = kSteps;
  for (const char* t : kAll) names += std::string(", ") + t;
  throw Error("no analysis table '" + table + "': the tables are " + names);
}

void pack(h5::Packer& p, const StepRow& r) {
  p.put(r.step);
  p.put(r.row);
  p.put(r.loss);
  p.put(r.lr);
  p.put(r.seconds);
}
void pack(h5::Packer& p, const VectorRow& r, const Widths& w) {
  p.put(r.step);
  p.str(r.scope, w.scope);
  p.str(r.kind, w.kind);
  p.put(r.n);
  p.put(r.zeros);
  p.put(r.nonfinite);
  p.put(r.fit_seconds);
}
void pack(h5::Packer& p, const FitRow& r, const Widths& w) {
  p.put(r.step);
  p.str(r.scope, w.scope);
  p.str(r.kind, w.kind);
  p.str(r.dist, w.dist);
  for (double v : {r.param1, r.param2, r.loglik, r.aic, r.ks_D, r.ks_p, r.ad_A2}) p.put(v);
  p.put(r.ks_n);
  p.put(static_cast<std::uint8_t>(r.ks_subsampled));
  p.str(r.error, w.error);
}
void pack(h5::Packer& p, const TailRow& r, const Widths& w) {
  p.put(r.step);
  p.str(r.scope, w.scope);
  p.str(r.dist, w.dist);
  p.put(r.density);
  p.put(r.threshold);
  p.put(r.predicted);
  p.put(r.observed);
}
void pack(h5::Packer& p, const QQRow& r, const Widths& w) {
  p.put(r.step);
  p.str(r.scope, w.scope);
  p.str(r.dist, w.dist);
  p.put(r.probability);
  p.put(r.fitted);
  p.put(r.sample);
}
void pack(h5::Packer& p, const ThresholdRow& r, const Widths& w) {
  p.put(r.step);
  p.str(r.scope, w.scope);
  p.str(r.kind, w.kind);
  p.str(r.method, w.method);
  p.put(r.density);
  p.put(r.threshold);
  p.put(r.stages);
  p.put(r.selected);
  for (double v : {r.quality, r.exact_threshold, r.rel_error, r.seconds}) p.put(v);
  p.str(r.error, w.error);
}

void unpack(h5::Unpacker& u, StepRow& r) {
  r.step = u.get<std::int64_t>();
  r.row = u.get<std::uint64_t>();
  r.loss = u.get<double>();
  r.lr = u.get<double>();
  r.seconds = u.get<double>();
}
void unpack(h5::Unpacker& u, VectorRow& r, const Widths& w) {
  r.step = u.get<std::int64_t>();
  r.scope = u.str(w.scope);
  r.kind = u.str(w.kind);
  r.n = u.get<std::uint64_t>();
  r.zeros = u.get<std::uint64_t>();
  r.nonfinite = u.get<std::uint64_t>();
  r.fit_seconds = u.get<double>();
}
void unpack(h5::Unpacker& u, FitRow& r, const Widths& w) {
  r.step = u.get<std::int64_t>();
  r.scope = u.str(w.scope);
  r.kind = u.str(w.kind);
  r.dist = u.str(w.dist);
  for (double* v : {&r.param1, &r.param2, &r.loglik, &r.aic, &r.ks_D, &r.ks_p, &r.ad_A2})
    *v = u.get<double>();
  r.ks_n = u.get<std::uint64_t>();
  r.ks_subsampled = u.get<std::uint8_t>() != 0;
  r.error = u.str(w.error);
}
void unpack(h5::Unpacker& u, TailRow& r, const Widths& w) {
  r.step = u.get<std::int64_t>();
  r.scope = u.str(w.scope);
  r.dist = u.str(w.dist);
  r.density = u.get<double>();
  r.threshold = u.get<double>();
  r.predicted = u.get<double>();
  r.observed = u.get<std::uint64_t>();
}
void unpack(h5::Unpacker& u, QQRow& r, const Widths& w) {
  r.step = u.get<std::int64_t>();
  r.scope = u.str(w.scope);
  r.dist = u.str(w.dist);
  r.probability = u.get<double>();
  r.fitted = u.get<double>();
  r.sample = u.get<double>();
}
void unpack(h5::Unpacker& u, ThresholdRow& r, const Widths& w) {
  r.step = u.get<std::int64_t>();
  r.scope = u.str(w.scope);
  r.kind = u.str(w.kind);
  r.method = u.str(w.method);
  r.density = u.get<double>();
  r.threshold = u.get<double>();
  r.stages = u.get<std::int32_t>();
  r.selected = u.get<std::uint64_t>();
  for (double* v : {&r.quality, &r.exact_threshold, &r.rel_error, &r.seconds}) *v = u.get<double>();
  r.error = u.str(w.error);
}

}  // namespace gs::analyzer::tables
