#pragma once
// Series over training for one scope (KS statistic per SID, estimation quality and SIDCo stages
// per method and density) behind one small interface with two sources: an analysis file written by
// `gradscope analyze` (gs::analyzer::AnalysisReader), or fit_report run on the fly over the
// snapshot's steps. make_training_source() is the one place that chooses.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gs/analyzer/plots/series.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/analyzer/plots/vector_view.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/fitting/report.hpp"

namespace gs::gui {

// The window draws with the charts and data types shared with the report's plots.
using namespace gs::analyzer::plots;
using analyzer::kModelScope;

// HDF5 is not built thread-safe on Debian: every HDF5 call in the GUI (snapshot reads, refresh,
// analysis reads) holds this lock, whichever thread makes it.
std::mutex& hdf5_mutex();

using SeriesProgress = std::function<void(int done, int total)>;

class TrainingSource {
 public:
  virtual ~TrainingSource() = default;
  virtual std::string describe() const = 0;
  // Runs on a worker thread; one call at a time. The series hold the methods at `density` (the
  // one shown; computed when the source lacks it, 0: none asked for) besides those the source
  // has. Stops early (returning what it has) when cancel becomes true. gs::Error on unreadable
  // data.
  virtual TrainingSeries load(const std::string& scope, double density, const SeriesProgress& progress,
                              const std::atomic<bool>& cancel) = 0;
};

// Whether densities holds d (relative tolerance 1e-9, as the charts match densities).
bool has_density(const std::vector<double>& densities, double d);

// fit_report over at most max_steps evenly strided steps of the snapshot (the last one always),
// cached per (scope, step) so a live file only costs its new steps, on `backend` (auto, cpu,
// cuda: the window's --backend). A density outside the options is computed alone (thresholds
// only) and cached too, so choosing a new ratio costs only that ratio. A device failure is
// thrown (gs::DeviceFailure), never a point.
class SnapshotTrainingSource final : public TrainingSource {
 public:
  SnapshotTrainingSource(std::shared_ptr<const data::SnapshotReader> reader, fitting::FitReportOptions options,
                         std::string backend = "auto", std::size_t max_steps = 40);
  std::string describe() const override;
  TrainingSeries load(const std::string& scope, double density, const SeriesProgress& progress,
                      const std::atomic<bool>& cancel) override;
  // The methods at one density only (no fits): what an analysis file lacking it needs.
  TrainingSeries loadDensity(const std::string& scope, double density, const SeriesProgress& progress,
                             const std::atomic<bool>& cancel);
  // The snapshot rows load() visits when the file has `recorded` rows.
  static std::vector<std::size_t> rows_for(std::size_t recorded, std::size_t max_steps);

 private:
  struct StepEntry {
    std::vector<KsPoint> ks;
    std::vector<MethodPoint> methods;
  };
  TrainingSeries visit(const std::string& scope, double density, bool fits, const SeriesProgress& progress,
                       const std::atomic<bool>& cancel);
  std::shared_ptr<const data::SnapshotReader> reader_;
  fitting::FitReportOptions options_;
  std::string backend_;
  std::size_t max_steps_;
  std::map<std::pair<std::string, std::int64_t>, StepEntry> cache_;
  std::map<std::tuple<std::string, std::int64_t, double>, std::vector<MethodPoint>> extra_;
};

// Whether an analysis file belongs to a snapshot. `mismatch`: the first difference in model, layer
// names, layer sizes or shapes, or recording (the snapshot's creation time), one line; empty when
// the file belongs. `note`: the steps differ (an analysis of some steps, or of a file that has
// grown since), one line; such a file is still usable.
struct AnalysisMatch {
  std::string mismatch, note;
};
AnalysisMatch match_analysis(const data::SnapshotReader& snapshot, const analyzer::AnalysisReader& analysis);

// The rows of an analysis file for the scope; a scope the file lacks (another granularity) falls
// back to `fallback`, and a density it lacks is computed by `fallback` (thresholds only).
// gs::Error when the file is no analysis of `snapshot` (match_analysis).
class AnalysisTrainingSource final : public TrainingSource {
 public:
  AnalysisTrainingSource(std::filesystem::path path, const data::SnapshotReader& snapshot,
                         std::unique_ptr<SnapshotTrainingSource> fallback);
  std::string describe() const override;
  TrainingSeries load(const std::string& scope, double density, const SeriesProgress& progress,
                      const std::atomic<bool>& cancel) override;
  // The densities the analysis used (read when constructed).
  const std::vector<double>& densities() const { return ratios_; }
  // match_analysis's note: how its steps differ from the snapshot's; empty when they do not.
  const std::string& note() const { return note_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<SnapshotTrainingSource> fallback_;
  std::vector<double> ratios_;
  std::string note_;
};

// FILE.analysis.h5 beside FILE.h5 (or FILE.h5.analysis.h5), when one exists; else empty.
std::filesystem::path find_analysis_beside(const std::filesystem::path& snapshot);

// The analysis file when analysis is not empty (gs::Error if it cannot be read or is no analysis
// of reader's snapshot), else on the fly on `backend`.
std::unique_ptr<TrainingSource> make_training_source(std::shared_ptr<const data::SnapshotReader> reader,
                                                     const std::filesystem::path& analysis,
                                                     const fitting::FitReportOptions& options,
                                                     const std::string& backend = "auto");

}  // namespace gs::gui
