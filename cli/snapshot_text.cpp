#include "snapshot_text.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "gs/base/bytes.hpp"

namespace gs::cli {

StepSummary summarize_steps(const std::vector<data::StepRecord>& steps) {
  StepSummary s;
  if (steps.empty()) return s;
  s.first = steps.front().step;
  s.last = steps.back().step;
  s.every = data::even_spacing(steps);
  return s;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<double> compression_ratio(const data::StorageInfo& storage) {
  if (storage.stored_grad_bytes == 0) return std::nullopt;
  return static_cast<double>(storage.raw_grad_bytes) / static_cast<double>(storage.stored_grad_bytes);
}

void print_snapshot_summary(const data::SnapshotReader& reader, const std::string& path) {
  const auto& meta = reader.meta();
  const auto& steps = reader.steps();
  const auto losses = reader.losses();  // every training step's, recorded or not
  const auto storage = data::storage_info(reader);
  const StepSummary ss = summarize_steps(steps);
  const auto min_it =
      std::min_element(losses.begin(), losses.end(), [](const auto& a, const auto& b) { return a.loss < b.loss; });
  const auto ratio = compression_ratio(storage);
  std::printf("file        %s (%s)\n", path.c_str(), gs::human_bytes(storage.file_bytes).c_str());
  std::printf("format      %s v%d, written by gradscope %s\n", data::kSnapshotFormat, meta.format_version,
              meta.gradscope_version.c_str());
  std::printf("model       %s\ndataset     %s\nseed        %" PRIu64 "\ncreated     %s\n", meta.model.c_str(),
              meta.dataset.c_str(), meta.seed, meta.created.c_str());
  std::printf("layers      %zu, %" PRId64 " values per step\n", reader.layers().size(), reader.total_numel());
  std::size_t width = 0;
  for (const auto& l : reader.layers()) width = std::max(width, l.name.size());
  for (const auto& l : reader.layers())
    std::printf("  %-*s  %-20s %" PRId64 "\n", static_cast<int>(width), l.name.c_str(), shape_text(l.shape).c_str(),
                l.numel());
  if (steps.empty()) {
    std::printf("steps       none recorded yet\n");
  } else {
    std::printf("steps       %zu recorded: first %" PRId64 ", last %" PRId64, steps.size(), *ss.first, *ss.last);
    if (ss.every)
      std::printf(", every %" PRId64, *ss.every);
    else if (steps.size() > 1)
      std::printf(", irregular spacing");
    std::printf("\nloss        %zu steps: first %.6g, last %.6g, min %.6g (step %" PRId64 ")\n", losses.size(),
                losses.front().loss, losses.back().loss, min_it->loss, min_it->step);
  }
  std::printf("gradients   %s raw, %s on disk", gs::human_bytes(storage.raw_grad_bytes).c_str(),
              gs::human_bytes(storage.stored_grad_bytes).c_str());
  if (ratio) std::printf(": compression %.3fx", *ratio);
  std::printf("\n");
}

}  // namespace gs::cli
