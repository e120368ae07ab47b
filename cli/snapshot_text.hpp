#pragma once
// Text shared by the subcommands that describe a snapshot (info, demo).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"

namespace gs::cli {

struct StepSummary {
  std::optional<std::int64_t> first, last, every;  // every: the common spacing, if there is one
};
StepSummary summarize_steps(const std::vector<data::StepRecord>& steps);

std::string shape_text(const std::vector<std::int64_t>& shape);

// raw / stored gradient bytes: what the snapshot's compression saved; empty before the first step.
std::optional<double> compression_ratio(const data::StorageInfo& storage);

// The human-readable summary of `gradscope info` on stdout.
void print_snapshot_summary(const data::SnapshotReader& reader, const std::string& path);

}  // namespace gs::cli
