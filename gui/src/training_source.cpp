#include "training_source.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <set>
#include <sstream>

#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::gui {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

bool has_density(const std::vector<double>& densities, double d) {
  return std::any_of(densities.begin(), densities.end(), [d](double r) { return std::abs(r - d) <= 1e-9 * d; });
}

// ---- on the fly -------------------------------------------------------------------------------

SnapshotTrainingSource::SnapshotTrainingSource(std::shared_ptr<const data::SnapshotReader> reader,
                                               fitting::FitReportOptions options, std::string backend,
                                               std::size_t max_steps)
    : reader_(std::move(reader)), options_(std::move(options)), backend_(std::move(backend)), max_steps_(max_steps) {
  if (!reader_) throw Error("no snapshot to compute the series from");
  if (max_steps_ < 2) throw Error("the series needs at least 2 steps");
  options_.qq_points = 1;  // the series shows no QQ plot
}

std::string SnapshotTrainingSource::describe() const {
  return "computed from the snapshot (fit_report, up to " + std::to_string(max_steps_) + " steps)";
}

std::vector<std::size_t> SnapshotTrainingSource::rows_for(std::size_t recorded, std::size_t max_steps) {
  std::vector<std::size_t> rows;
  if (recorded == 0) return rows;
  const std::size_t stride = (recorded + max_steps - 2) / (max_steps - 1);
  for (std::size_t r = 0; r < recorded; r += std::max<std::size_t>(stride, 1)) rows.push_back(r);
  if (rows.back() != recorded - 1) rows.push_back(recorded - 1);
  return rows;
}

TrainingSeries SnapshotTrainingSource::load(const std::string& scope, double density, const SeriesProgress& progress,
                                            const std::atomic<bool>& cancel) {
  return visit(scope, density, true, progress, cancel);
}

TrainingSeries SnapshotTrainingSource::loadDensity(const std::string& scope, double density,
                                                   const SeriesProgress& progress, const std::atomic<bool>& cancel) {
  return visit(scope, density, false, progress, cancel);
}

TrainingSeries SnapshotTrainingSource::visit(const std::string& scope, double density, bool fits,
                                             const SeriesProgress& progress, const std::atomic<bool>& cancel) {
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
  // A density the options lack: thresholds alone (no fits, no sample), one density.
  const bool extra = density > 0.0 && !has_density(options_.densities, density);
  fitting::FitReportOptions extra_options = options_;
  extra_options.densities = {density};
  extra_options.dists.clear();
  int done = 0;
  for (std::size_t row : rows) {
    if (cancel) break;
    const std::int64_t step = steps[row].step;
    std::vector<float> g;
    auto values = [&]() -> const std::vector<float>& {
      if (g.empty()) {
        std::lock_guard lock(hdf5_mutex());
        g = scope == kModelScope ? reader_->read_model(row) : reader_->read(row, layer);
      }
      return g;
    };
    if (fits || !extra) {
      auto key = std::make_pair(scope, step);
      auto it = cache_.find(key);
      if (it == cache_.end()) {
        StepEntry entry;
        auto passes = kernels::make_passes(values(), backend);
        const fitting::FitReport report = fitting::fit_report(*passes, options_);
        for (const auto& f : report.fits) entry.ks.push_back({step, f.dist, f.error.empty() ? f.ks_D : std::nan("")});
        for (const auto& t : report.thresholds)
          entry.methods.push_back({step, t.result.method, t.result.density,
                                   t.error.empty() ? t.result.quality : std::nan(""), t.result.stages});
        it = cache_.emplace(key, std::move(entry)).first;
      }
      if (fits) out.ks.insert(out.ks.end(), it->second.ks.begin(), it->second.ks.end());
      for (const auto& m : it->second.methods)
        if (fits || has_density({density}, m.density)) out.methods.push_back(m);
    }
    if (extra) {
      auto key = std::make_tuple(scope, step, density);
      auto it = extra_.find(key);
      if (it == extra_.end()) {
        auto passes = kernels::make_passes(values(), backend);
        const fitting::FitReport report = fitting::fit_report(*passes, extra_options);
        std::vector<MethodPoint> points;
        for (const auto& t : report.thresholds)
          points.push_back({step, t.result.method, t.result.density, t.error.empty() ? t.result.quality : std::nan(""),
                            t.result.stages});
        it = extra_.emplace(key, std::move(points)).first;
      }
      out.methods.insert(out.methods.end(), it->second.begin(), it->second.end());
    }
    out.steps.push_back(step);
    if (progress) progress(++done, int(rows.size()));
  }
  return out;
}

// ---- analysis file ----------------------------------------------------------------------------

namespace {

// The first layer that differs by name or size between the snapshot and the vectors an analysis
// stored (it keeps no shapes, only their hash); empty when names and sizes all agree.
std::string first_layer_difference(const data::SnapshotReader& snapshot,
                                   const std::vector<analyzer::VectorRow>& vectors) {
  std::vector<std::string> names;
  std::map<std::string, std::uint64_t> size_of;
  for (const auto& v : vectors)
    if (size_of.emplace(v.scope, v.n).second && v.scope != kModelScope) names.push_back(v.scope);
  std::map<std::string, std::uint64_t> snapshot_size;
  for (const auto& l : snapshot.layers()) snapshot_size[l.name] = std::uint64_t(l.numel());
  for (const auto& name : names)
    if (!snapshot_size.count(name)) return "it has layer '" + name + "', which the snapshot lacks";
  if (!names.empty())  // an analysis of every layer, not only of the whole model
    for (const auto& l : snapshot.layers()) {
      const auto it = size_of.find(l.name);
      if (it == size_of.end()) return "the snapshot's layer '" + l.name + "' is not in it";
      if (it->second != std::uint64_t(l.numel()))
        return "layer '" + l.name + "' has " + std::to_string(it->second) + " elements in it, " +
               std::to_string(std::uint64_t(l.numel())) + " in the snapshot";
    }
  if (const auto it = size_of.find(kModelScope);
      it != size_of.end() && it->second != std::uint64_t(snapshot.total_numel()))
    return "the whole model has " + std::to_string(it->second) + " elements in it, " +
           std::to_string(std::uint64_t(snapshot.total_numel())) + " in the snapshot";
  return {};
}

}  // namespace

AnalysisMatch match_analysis(const data::SnapshotReader& snapshot, const analyzer::AnalysisReader& analysis) {
  AnalysisMatch out;
  const analyzer::SourceIdentity& made_of = analysis.source();
  const data::SnapshotMeta& meta = snapshot.meta();
  if (made_of.model != meta.model) {
    out.mismatch = "it was made of model '" + made_of.model + "', the snapshot records model '" + meta.model + "'";
    return out;
  }
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  for (const auto& l : snapshot.layers()) shapes.emplace_back(l.name, l.shape);
  const analyzer::SourceIdentity mine = analyzer::source_identity(snapshot.path(), meta.created, shapes, meta.model);
  if (mine.layers_hash != made_of.layers_hash) {
    out.mismatch = first_layer_difference(snapshot, analysis.vectors());
    if (out.mismatch.empty())
      out.mismatch = "its layer shapes differ from the snapshot's (layers hash " + made_of.layers_hash +
                     ", the snapshot's " + mine.layers_hash + ")";
    return out;
  }
  // Same model and layers, but another capture: its numbers describe other gradients.
  if (made_of.created != meta.created) {
    out.mismatch =
        "it was made of another recording (created " + made_of.created + "), the snapshot was created " + meta.created;
    return out;
  }
  std::set<std::int64_t> recorded, analysed;
  for (const auto& s : snapshot.steps()) recorded.insert(s.step);
  for (const auto& s : analysis.steps()) analysed.insert(s.step);
  std::size_t common = 0;
  std::optional<std::int64_t> first_missing, first_extra;
  for (std::int64_t s : recorded)
    if (analysed.count(s))
      ++common;
    else if (!first_missing)
      first_missing = s;
  for (std::int64_t s : analysed)
    if (!recorded.count(s) && !first_extra) first_extra = s;
  if (first_missing)
    out.note = "covers " + std::to_string(common) + " of the snapshot's " + std::to_string(recorded.size()) +
               " recorded steps (step " + std::to_string(*first_missing) + " is not analysed)";
  if (first_extra)
    out.note += std::string(out.note.empty() ? "" : "; ") +
                "has steps the snapshot lacks (first: " + std::to_string(*first_extra) + ")";
  return out;
}

AnalysisTrainingSource::AnalysisTrainingSource(std::filesystem::path path, const data::SnapshotReader& snapshot,
                                               std::unique_ptr<SnapshotTrainingSource> fallback)
    : path_(std::move(path)), fallback_(std::move(fallback)) {
  std::lock_guard lock(hdf5_mutex());
  analyzer::AnalysisReader reader(path_);
  const AnalysisMatch match = match_analysis(snapshot, reader);
  if (!match.mismatch.empty())
    throw Error("not an analysis of " + snapshot.path().filename().string() + ": " + match.mismatch);
  note_ = match.note;
  ratios_ = reader.options().densities;
}

std::string AnalysisTrainingSource::describe() const {
  return "analysis file " + path_.filename().string() + (note_.empty() ? "" : " (" + note_ + ")");
}

TrainingSeries AnalysisTrainingSource::load(const std::string& scope, double density, const SeriesProgress& progress,
                                            const std::atomic<bool>& cancel) {
  TrainingSeries out;
  {
    std::lock_guard lock(hdf5_mutex());
    analyzer::AnalysisReader reader(path_);
    out = series_from_rows(reader.fits(), reader.thresholds(), scope);
  }
  out.origin = describe();
  if (out.steps.empty() && fallback_) {
    TrainingSeries fb = fallback_->load(scope, density, progress, cancel);
    fb.origin += " (" + path_.filename().string() + " has no rows for " + scope + ")";
    return fb;
  }
  // A ratio the analysis did not use: its methods from the snapshot, as for a missing scope.
  if (density > 0.0 && !has_density(ratios_, density) && fallback_) {
    const TrainingSeries extra = fallback_->loadDensity(scope, density, progress, cancel);
    out.methods.insert(out.methods.end(), extra.methods.begin(), extra.methods.end());
    std::ostringstream ratio;
    ratio << std::setprecision(6) << density;
    out.origin +=
        "; ratio " + ratio.str() + " " + fallback_->describe() + " (" + path_.filename().string() + " lacks it)";
    return out;
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

std::unique_ptr<TrainingSource> make_training_source(std::shared_ptr<const data::SnapshotReader> reader,
                                                     const std::filesystem::path& analysis,
                                                     const fitting::FitReportOptions& options,
                                                     const std::string& backend) {
  if (!reader) throw Error("no snapshot to compute the series from");
  const data::SnapshotReader& snapshot = *reader;
  auto on_the_fly = std::make_unique<SnapshotTrainingSource>(std::move(reader), options, backend);
  if (analysis.empty()) return on_the_fly;
  return std::make_unique<AnalysisTrainingSource>(analysis, snapshot, std::move(on_the_fly));
}

}  // namespace gs::gui
