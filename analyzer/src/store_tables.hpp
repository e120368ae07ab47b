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

std::vector<h5::Field> step_fields();
std::vector<h5::Field> vector_fields(const Widths& w);
std::vector<h5::Field> fit_fields(const Widths& w);
std::vector<h5::Field> tail_fields(const Widths& w);
std::vector<h5::Field> qq_fields(const Widths& w);
std::vector<h5::Field> threshold_fields(const Widths& w);
// The step column alone (every table starts with it).
std::vector<h5::Field> step_column();
// The fields of the table named `table` (one of kSteps, kAll); gs::Error naming the tables otherwise.
std::vector<h5::Field> fields_of(const std::string& table, const Widths& w);

void pack(h5::Packer& p, const StepRow& r);
void pack(h5::Packer& p, const VectorRow& r, const Widths& w);
void pack(h5::Packer& p, const FitRow& r, const Widths& w);
void pack(h5::Packer& p, const TailRow& r, const Widths& w);
void pack(h5::Packer& p, const QQRow& r, const Widths& w);
void pack(h5::Packer& p, const ThresholdRow& r, const Widths& w);

void unpack(h5::Unpacker& u, StepRow& r);
void unpack(h5::Unpacker& u, VectorRow& r, const Widths& w);
void unpack(h5::Unpacker& u, FitRow& r, const Widths& w);
void unpack(h5::Unpacker& u, TailRow& r, const Widths& w);
void unpack(h5::Unpacker& u, QQRow& r, const Widths& w);
void unpack(h5::Unpacker& u, ThresholdRow& r, const Widths& w);

}  // namespace gs::analyzer::tables
