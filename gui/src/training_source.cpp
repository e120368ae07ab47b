#include "training_source.hpp"

#include <algorithm>
#include <cmath>

#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::gui {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

// ---- on the fly -------------------------------------------------------------------------------

SnapshotTrainingSource::SnapshotTrainingSource(std::shared_ptr<const data::SnapshotReader> reader,
                                               fitting::FitReportOptions options, std::string backend,
                                               std::size_t max_steps)
    : reader_(std::move(reader)),
      options_(std::move(options)),
      backend_(std::move(backend)),
      max_steps_(max_steps) {
  if (!reader_) throw Error("no snapshot to compute the series from");
  if (max_steps_ < 2) throw Error("the series needs at least 2 steps");
  options_.qq_points = 1;  // the series shows no QQ plot
}

std::string SnapshotTrainingSource::describe() const {
  return "computed from the snapshot (fit_report, up to " + std::to_string(max_steps_) +
         " steps)";
}

std::vector<std::size_t> SnapshotTrainingSource::rows_for(std::size_t recorded,
                                                          std::size_t max_steps) {
  std::vector<std::size_t> rows;
  if (recorded == 0) return rows;
  const std::size_t stride = (recorded + max_steps - 2) / (max_steps - 1);
  for (std::size_t r = 0; r < recorded; r += std::max<std::size_t>(stride, 1)) rows.push_back(r);
  if (rows.back() != recorded - 1) rows.push_back(recorded - 1);
  return rows;
}

TrainingSeries SnapshotTrainingSource::load(const std::string& scope,
                                            const SeriesProgress& progress,
                                            const std::atomic<bool>& cancel) {
  TrainingSeries out;
  out.scope = scope;
  out.origin = describe();
  std::vector<data::StepRecord> steps;
  std::size_t layer = 0;
  {
    std::lock_guard lock(hdf5_mutex());
    steps = reader_->steps();
    if (scope != kModelScope) layer = reader_->layer_index(scope);
  }
  const auto rows = rows_for(steps.size(), max_steps_);
  const kernels::BackendKind backend = kernels::resolve_backend(backend_);
  int done = 0;
  for (std::size_t row : rows) {
    if (cancel) break;
    const std::int64_t step = steps[row].step;
    auto key = std::make_pair(scope, step);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      std::vector<float> g;
      {
        std::lock_guard lock(hdf5_mutex());
        g = scope == kModelScope ? reader_->read_model(row) : reader_->read(row, layer);
      }
      StepEntry entry;
      auto passes = kernels::make_passes(g, backend);
      const fitting::FitReport report = fitting::fit_report(*passes, options_);
      for (const auto& f : report.fits)
        entry.ks.push_back({step, f.dist, f.error.empty() ? f.ks_D : std::nan("")});
      for (const auto& t : report.thresholds)
        entry.methods.push_back({step, t.result.method, t.result.density,
                                 t.error.empty() ? t.result.quality : std::nan(""),
                                 t.result.stages});
      it = cache_.emplace(key, std::move(entry)).first;
    }
    out.steps.push_back(step);
    out.ks.insert(out.ks.end(), it->second.ks.begin(), it->second.ks.end());
    out.methods.insert(out.methods.end(), it->second.methods.begin(), it->second.methods.end());
    if (progress) progress(++done, int(rows.size()));
  }
  return out;
}

// ---- analysis file ----------------------------------------------------------------------------

AnalysisTrainingSource::AnalysisTrainingSource(std::filesystem::path path,
                                               std::unique_ptr<TrainingSource> fallback)
    : path_(std::move(path)), fallback_(std::move(fallback)) {
  std::lock_guard lock(hdf5_mutex());
  analyzer::AnalysisReader reader(path_);
  ratios_ = reader.options().densities;
}

std::string AnalysisTrainingSource::describe() const {
  return "analysis file " + path_.filename().string();
}

TrainingSeries AnalysisTrainingSource::load(const std::string& scope,
                                            const SeriesProgress& progress,
                                            const std::atomic<bool>& cancel) {
  TrainingSeries out;
  {
    std::lock_guard lock(hdf5_mutex());
    analyzer::AnalysisReader reader(path_);
    out = series_from_rows(reader.fits(), reader.thresholds(), scope);
  }
  out.origin = describe();
  if (out.steps.empty() && fallback_) {
    TrainingSeries fb = fallback_->load(scope, progress, cancel);
    fb.origin += " (" + path_.filename().string() + " has no rows for " + scope + ")";
    return fb;
  }
  if (progress) progress(1, 1);
  return out;
}

// ---- choice -----------------------------------------------------------------------------------

std::filesystem::path find_analysis_beside(const std::filesystem::path& snapshot) {
  std::filesystem::path stem_based = snapshot;
  stem_based.replace_extension(".analysis.h5");
  std::filesystem::path appended = snapshot;
  appended += ".analysis.h5";
  for (const auto& p : {stem_based, appended}) {
    std::error_code ec;
    if (p != snapshot && std::filesystem::is_regular_file(p, ec)) return p;
  }
  return {};
}

std::unique_ptr<TrainingSource> make_training_source(
    std::shared_ptr<const data::SnapshotReader> reader, const std::filesystem::path& analysis,
    const fitting::FitReportOptions& options, const std::string& backend) {
  auto on_the_fly = std::make_unique<SnapshotTrainingSource>(std::move(reader), options, backend);
  if (analysis.empty()) return on_the_fly;
  return std::make_unique<AnalysisTrainingSource>(analysis, std::move(on_the_fly));
}

}  // namespace gs::gui
