#pragma once
// Internal: the field lists of the analysis tables and the packing of their rows.
#include <vector>

#include "gs/analyzer/store.hpp"
#include "h5_table.hpp"

namespace gs::analyzer::tables {

inline constexpr const char* kSteps = "steps";
inline constexpr const char* kVectors = "vectors";
inline constexpr const char* kFits = "fits";
inline constexpr const char* kTails = "tails";
inline constexpr const char* kQQ = "qq";
inline constexpr const char* kThresholds = "thresholds";
inline constexpr const char* kAll[] = {kVectors, kFits, kTails, kQQ, kThresholds};  // besides steps

// Widths (bytes) of the fixed-length string fields.
struct Widths {
  std::size_t scope = 32, kind = 16, dist = 12, method = 16, error = 160;
};
Widths read_widths(hid_t file_id, const std::filesystem::path& file);

// A column of a stored row: its name and stored type, the width of a string column (a member of
// Widths), and how the row's member is packed and unpacked. columns<Row>() lists a row type's
// columns in their stored order: the one description the field list, pack and unpack follow.
template <class Row>
struct Column {
  const char* name;
  h5::FieldType type;
  std::size_t Widths::*width;  // string columns: which width; else null
  void (*pack)(h5::Packer&, const Row&, std::size_t width);
  void (*unpack)(h5::Unpacker&, Row&, std::size_t width);
};
template <class Row>
const std::vector<Column<Row>>& columns();
template <>
const std::vector<Column<StepRow>>& columns<StepRow>();
template <>
const std::vector<Column<VectorRow>>& columns<VectorRow>();
template <>
const std::vector<Column<FitRow>>& columns<FitRow>();
template <>
const std::vector<Column<TailRow>>& columns<TailRow>();
template <>
const std::vector<Column<QQRow>>& columns<QQRow>();
template <>
const std::vector<Column<ThresholdRow>>& columns<ThresholdRow>();

// The table's fields, its rows packed and unpacked, as columns<Row>() says.
template <class Row>
std::vector<h5::Field> fields(const Widths& w = {}) {
  std::vector<h5::Field> out;
  for (const auto& c : columns<Row>()) out.push_back({c.name, c.type, c.width ? w.*c.width : 0});
  return out;
}
template <class Row>
void pack(h5::Packer& p, const Row& r, const Widths& w = {}) {
  for (const auto& c : columns<Row>()) c.pack(p, r, c.width ? w.*c.width : 0);
}
template <class Row>
void unpack(h5::Unpacker& u, Row& r, const Widths& w = {}) {
  for (const auto& c : columns<Row>()) c.unpack(u, r, c.width ? w.*c.width : 0);
}

// The step column alone (every table starts with it).
std::vector<h5::Field> step_column();
// The fields of the table named `table` (one of kSteps, kAll); gs::Error naming the tables otherwise.
std::vector<h5::Field> fields_of(const std::string& table, const Widths& w);

}  // namespace gs::analyzer::tables
