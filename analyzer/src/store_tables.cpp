// The columns of the analysis tables (docs/analysis-format.md): one list per row type names each
// column, its stored type and the row's member; the field lists, packing and unpacking all follow
// it.
#include "store_tables.hpp"

#include <type_traits>

namespace gs::analyzer::tables {
namespace {

using h5::Field;
using h5::FieldType;

template <class>
struct Member;
template <class R, class T>
struct Member<T R::*> {
  using Row = R;
  using Type = T;
};

template <class T>
constexpr FieldType stored_type() {
  if constexpr (std::is_same_v<T, std::int64_t>)
    return FieldType::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return FieldType::u64;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return FieldType::i32;
  else if constexpr (std::is_same_v<T, bool>)
    return FieldType::u8;
  else if constexpr (std::is_same_v<T, double>)
    return FieldType::f64;
  else {
    static_assert(std::is_same_v<T, std::string>, "a column of a type the tables do not store");
    return FieldType::str;
  }
}

// The column `name` stores member M of its row; a string column has the width `width` names.
template <auto M>
Column<typename Member<decltype(M)>::Row> column(const char* name, std::size_t Widths::*width = nullptr) {
  using R = typename Member<decltype(M)>::Row;
  using T = typename Member<decltype(M)>::Type;
  Column<R> c{name, stored_type<T>(), width, nullptr, nullptr};
  c.pack = [](h5::Packer& p, const R& r, std::size_t w) {
    if constexpr (std::is_same_v<T, std::string>)
      p.str(r.*M, w);
    else if constexpr (std::is_same_v<T, bool>)
      p.put(static_cast<std::uint8_t>(r.*M));
    else
      p.put(r.*M);
  };
  c.unpack = [](h5::Unpacker& u, R& r, std::size_t w) {
    if constexpr (std::is_same_v<T, std::string>)
      r.*M = u.str(w);
    else if constexpr (std::is_same_v<T, bool>)
      r.*M = u.get<std::uint8_t>() != 0;
    else
      r.*M = u.get<T>();
  };
  return c;
}

}  // namespace

template <>
const std::vector<Column<StepRow>>& columns<StepRow>() {
  static const std::vector<Column<StepRow>> c = {column<&StepRow::step>("step"), column<&StepRow::row>("row"),
                                                 column<&StepRow::loss>("loss"), column<&StepRow::lr>("lr"),
                                                 column<&StepRow::seconds>("seconds")};
  return c;
}

template <>
const std::vector<Column<VectorRow>>& columns<VectorRow>() {
  using R = VectorRow;
  static const std::vector<Column<R>> c = {column<&R::step>("step"),
                                           column<&R::scope>("scope", &Widths::scope),
                                           column<&R::kind>("kind", &Widths::kind),
                                           column<&R::n>("n"),
                                           column<&R::zeros>("zeros"),
                                           column<&R::nonfinite>("nonfinite"),
                                           column<&R::fit_seconds>("fit_seconds")};
  return c;
}

template <>
const std::vector<Column<FitRow>>& columns<FitRow>() {
  using R = FitRow;
  static const std::vector<Column<R>> c = {column<&R::step>("step"),
                                           column<&R::scope>("scope", &Widths::scope),
                                           column<&R::kind>("kind", &Widths::kind),
                                           column<&R::dist>("dist", &Widths::dist),
                                           column<&R::param1>("param1"),
                                           column<&R::param2>("param2"),
                                           column<&R::loglik>("loglik"),
                                           column<&R::aic>("aic"),
                                           column<&R::ks_D>("ks_D"),
                                           column<&R::ks_p>("ks_p"),
                                           column<&R::ad_A2>("ad_A2"),
                                           column<&R::ks_n>("ks_n"),
                                           column<&R::ks_subsampled>("ks_subsampled"),
                                           column<&R::error>("error", &Widths::error)};
  return c;
}

template <>
const std::vector<Column<TailRow>>& columns<TailRow>() {
  using R = TailRow;
  static const std::vector<Column<R>> c = {column<&R::step>("step"),
                                           column<&R::scope>("scope", &Widths::scope),
                                           column<&R::dist>("dist", &Widths::dist),
                                           column<&R::density>("ratio"),
                                           column<&R::threshold>("threshold"),
                                           column<&R::predicted>("predicted"),
                                           column<&R::observed>("observed")};
  return c;
}

template <>
const std::vector<Column<QQRow>>& columns<QQRow>() {
  using R = QQRow;
  static const std::vector<Column<R>> c = {column<&R::step>("step"),
                                           column<&R::scope>("scope", &Widths::scope),
                                           column<&R::dist>("dist", &Widths::dist),
                                           column<&R::probability>("probability"),
                                           column<&R::fitted>("fitted"),
                                           column<&R::sample>("sample")};
  return c;
}

template <>
const std::vector<Column<ThresholdRow>>& columns<ThresholdRow>() {
  using R = ThresholdRow;
  static const std::vector<Column<R>> c = {column<&R::step>("step"),
                                           column<&R::scope>("scope", &Widths::scope),
                                           column<&R::kind>("kind", &Widths::kind),
                                           column<&R::method>("method", &Widths::method),
                                           column<&R::density>("ratio"),
                                           column<&R::threshold>("threshold"),
                                           column<&R::stages>("stages"),
                                           column<&R::selected>("selected"),
                                           column<&R::n>("n"),
                                           column<&R::too_small>("too_small"),
                                           column<&R::quality>("quality"),
                                           column<&R::exact_threshold>("exact_threshold"),
                                           column<&R::rel_error>("rel_error"),
                                           column<&R::seconds>("seconds"),
                                           column<&R::error>("error", &Widths::error)};
  return c;
}

Widths read_widths(hid_t file_id, const std::filesystem::path& file) {
  Widths w;
  w.scope = h5::stored_width(file_id, kFits, "scope", file);
  w.kind = h5::stored_width(file_id, kFits, "kind", file);
  w.dist = h5::stored_width(file_id, kFits, "dist", file);
  w.method = h5::stored_width(file_id, kThresholds, "method", file);
  w.error = h5::stored_width(file_id, kFits, "error", file);
  return w;
}

std::vector<Field> step_column() { return {{"step", FieldType::i64, 0}}; }

std::vector<Field> fields_of(const std::string& table, const Widths& w) {
  if (table == kSteps) return fields<StepRow>(w);
  if (table == kVectors) return fields<VectorRow>(w);
  if (table == kFits) return fields<FitRow>(w);
  if (table == kTails) return fields<TailRow>(w);
  if (table == kQQ) return fields<QQRow>(w);
  if (table == kThresholds) return fields<ThresholdRow>(w);
  std::string names = kSteps;
  for (const char* t : kAll) names += std::string(", ") + t;
  throw Error("no analysis table '" + table + "': the tables are " + names);
}

}  // namespace gs::analyzer::tables
