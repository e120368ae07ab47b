#pragma once
// The analysis results store (docs/analysis-format.md): one HDF5 file of plain tables, one row per
// (step, scope) in /vectors, per (step, scope, dist) in /fits, per (step, scope, dist, density) in
// /tails, per (step, scope, dist, probability) in /qq and per (step, scope, method, density) in
// /thresholds, plus /steps with one row per analysed step. AnalysisReader loads them as vectors of
// the row structs below; h5py/pandas load them with pandas.DataFrame(f["fits"][:]).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "gs/analyzer/config.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/fitting/report.hpp"

namespace gs::analyzer {

inline constexpr const char* kAnalysisFormat = "gradscope-analysis";
// Version 2: --steps names training steps (version 1: rows of the snapshot's /steps) and
// /thresholds has n and too_small. Readers read both; only the current one is appended to or merged.
inline constexpr int kAnalysisFormatVersion = 2;
inline constexpr int kOldestAnalysisFormatVersion = 1;

struct StepRow {
  std::int64_t step = 0;
  std::uint64_t row = 0;  // row of the snapshot's /steps
  double loss = 0.0;
  double lr = 0.0;
  double seconds = 0.0;  // wall time of the whole step's analysis (reads included)
};

struct VectorRow {
  std::int64_t step = 0;
  std::string scope, kind;
  std::uint64_t n = 0, zeros = 0, nonfinite = 0;
  double fit_seconds = 0.0;  // all fits with their goodness of fit (sort or sample included)
};

struct FitRow {
  std::int64_t step = 0;
  std::string scope, kind, dist;
  // Parameters in fitting's report order: exponential (beta, NaN); gamma (alpha, beta);
  // gpareto (xi, sigma); normal (mu, sigma).
  double param1 = 0.0, param2 = 0.0;
  double loglik = 0.0, aic = 0.0, ks_D = 0.0, ks_p = 0.0, ad_A2 = 0.0;
  std::uint64_t ks_n = 0;
  bool ks_subsampled = false;
  std::string error;  // non-empty: the fit failed; numbers are NaN
};

struct TailRow {
  std::int64_t step = 0;
  std::string scope, dist;
  double density = 0.0, threshold = 0.0, predicted = 0.0;
  std::uint64_t observed = 0;
};

struct QQRow {
  std::int64_t step = 0;
  std::string scope, dist;
  double probability = 0.0, fitted = 0.0, sample = 0.0;
};

// Quality is summarised only over vectors whose target count n*density is at least this: below it
// k = max(1, floor(n*density)) rounding alone moves the achieved density by 1% or more (a 10-value
// bias at density 0.01 keeps 1 value, "quality" 10).
inline constexpr double kMinTargetCountForQuality = 100.0;
// The rule the summary leaves vectors out by and the thresholds table's too_small flag states:
// n*density < kMinTargetCountForQuality.
inline bool too_small_for_quality(std::uint64_t n, double density) {
  return double(n) * density < kMinTargetCountForQuality;
}

struct ThresholdRow {
  std::int64_t step = 0;
  std::string scope, kind, method;
  double density = 0.0, threshold = 0.0;
  std::int32_t stages = 0;       // what the method counts as stages; 0: none (top-k, DGC) or error
  std::uint64_t selected = 0;    // finite x at or above threshold (fitting::selection_bound)
  double quality = 0.0;          // (selected/n)/density
  double exact_threshold = 0.0;  // exact top-k's threshold at the same density
  double rel_error = 0.0;        // (threshold - exact)/exact; NaN when exact is 0
  double seconds = 0.0;          // time the method took
  std::string error;
  std::uint64_t n = 0;     // elements of the vector
  bool too_small = false;  // too_small_for_quality(n, density): the summary leaves it out
};

// A fit as the store keeps it and back, written once: the fit of `dist` in fitting's report
// (parameters in its order into param1, param2; NaN numbers for a failed fit), and a stored row
// as the report's DistFit (its tail checks and QQ points are rows of their own tables).
FitRow to_fit_row(const fitting::DistFit& fit, std::int64_t step, const std::string& scope, const std::string& kind);
fitting::DistFit to_dist_fit(const FitRow& row);
// The param_names root attribute: "dist:name1,name2;..." for every SID, "-" for a parameter the
// law does not have (exponential:beta,-), from fitting::parameter_names.
std::string param_names_attribute();

// Everything one analysed step adds to the store.
struct StepResults {
  StepRow step;
  std::vector<VectorRow> vectors;
  std::vector<FitRow> fits;
  std::vector<TailRow> tails;
  std::vector<QQRow> qq;
  std::vector<ThresholdRow> thresholds;
};

// Where the results came from, stored as root attributes.
struct SourceIdentity {
  std::string path;         // as given (absolute)
  std::string created;      // the snapshot's creation time
  std::string layers_hash;  // 16 hex digits: FNV-1a 64 over layer names and shapes
  std::string model;
  bool operator==(const SourceIdentity&) const = default;
};
SourceIdentity source_identity(const std::filesystem::path& path, const std::string& created,
                               const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& layers,
                               const std::string& model);

// The result-shaping options as stored (canonical text), compared on re-runs.
struct StoredOptions {
  std::vector<double> densities;
  std::vector<std::string> dists, methods;
  std::string granularity, steps;
  int stages = 0;
  std::uint64_t ks_max_points = 0, seed = 0;
  int qq_points = 0;
  bool operator==(const StoredOptions&) const = default;
  // Whether results made with `other` belong in the same store: every option equal but the step
  // selection (a re-run adds the steps it selects), the lists as sets (their order is no option).
  bool same_analysis(const StoredOptions& other) const;
  static StoredOptions from(const AnalyzeConfig& c);
  std::string describe() const;  // one line, for messages
};

// Appends step results to a new or existing analysis file. Each step's rows are written table by
// table and its /steps row last, then the file is flushed: /steps is the commit record, and rows
// of a step cut off by a crash are dropped when the file is opened again.
class AnalysisWriter {
 public:
  // Creates path (replacing it only when replace is true, else gs::Error) with empty tables.
  static AnalysisWriter create(const std::filesystem::path& path, const SourceIdentity& source,
                               const StoredOptions& options, std::size_t max_scope_chars, bool replace);
  // Opens an existing file for appending; gs::Error when it is not an analysis file, was made by
  // an older gradscope (another table layout), or its source or options are not the same analysis
  // (StoredOptions::same_analysis: the message says what differs and suggests --force). The
  // stored step selection becomes the union of the stored one and the given one.
  static AnalysisWriter open(const std::filesystem::path& path, const SourceIdentity& source,
                             const StoredOptions& options);
  // The options as the file holds them (after open(): its lists in their stored order, which a
  // re-run follows, and the joined step selection).
  const StoredOptions& options() const;
  ~AnalysisWriter();
  AnalysisWriter(AnalysisWriter&&) noexcept;
  AnalysisWriter& operator=(AnalysisWriter&&) noexcept;

  // Training steps already in /steps.
  const std::vector<std::int64_t>& steps_done() const;
  // A step's rows in two parts: its rows of every table but /steps, then its /steps row (the
  // commit record) and the flush. append() does both.
  void write_rows(const StepResults& results);
  void commit(const StepRow& step);
  void append(const StepResults& results);
  void close();

 private:
  struct Impl;
  explicit AnalysisWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The store as its file holds it, for readers in other languages (Python's
// gradscope.load_analysis): a root attribute, or a table's column, under the file's own name.
using AttributeValue = std::variant<std::string, std::int64_t, std::uint64_t, std::vector<double>>;
struct Attribute {
  std::string name;
  AttributeValue value;
};
struct Column {
  std::string name;
  std::variant<std::vector<std::int64_t>, std::vector<std::uint64_t>, std::vector<std::int32_t>,
               std::vector<std::uint8_t>, std::vector<double>, std::vector<std::string>>
      values;
};

class AnalysisReader {
 public:
  // The tables, in the order of docs/analysis-format.md: steps, vectors, fits, tails, qq, thresholds.
  static const std::vector<std::string>& table_names();

  // gs::Error naming the file: missing, not HDF5, not an analysis file, unknown version.
  explicit AnalysisReader(const std::filesystem::path& path);
  // The same over a file image in memory.
  explicit AnalysisReader(const data::FileImage& image);
  ~AnalysisReader();
  AnalysisReader(AnalysisReader&&) noexcept;
  AnalysisReader& operator=(AnalysisReader&&) noexcept;

  const std::filesystem::path& path() const;
  const SourceIdentity& source() const;
  const StoredOptions& options() const;
  std::string created() const;      // when the analysis file was made
  int format_version() const;       // kOldestAnalysisFormatVersion .. kAnalysisFormatVersion
  std::size_t scope_width() const;  // bytes of the scope fields (the longest layer name, or 8)

  // Committed rows only (those of steps in /steps), in the order they were written. A version 1
  // file's thresholds get n from /vectors and too_small by its rule, as version 2 stores them.
  std::vector<StepRow> steps() const;
  std::vector<VectorRow> vectors() const;
  std::vector<FitRow> fits() const;
  std::vector<TailRow> tails() const;
  std::vector<QQRow> qq() const;
  std::vector<ThresholdRow> thresholds() const;

  // Every root attribute (in name order) with its stored type: strings, integers, float arrays.
  std::vector<Attribute> attributes() const;
  // One table's committed rows as columns, in the file's field order with its field names and
  // types; gs::Error naming the tables for an unknown name.
  std::vector<Column> table(const std::string& name) const;

 private:
  struct Impl;
  void load();  // reads what the open file holds into impl_
  std::unique_ptr<Impl> impl_;
};

// Shards of one analysis: `gradscope analyze` runs over the same snapshot with the same options
// whose step selections tile one selection (a:b:s, b:c:s, ..., the last one may be open, each
// shard's length a multiple of s). merge_stores writes their rows, step by step in snapshot row
// order, into `output`, which then equals the store of one run over the whole selection a:...:s
// (timings and the creation time aside). gs::Error naming the shard and what differs: another
// snapshot, other options, selections that do not tile, no shard; an existing output is replaced
// only with replace.
struct MergeResult {
  std::size_t shards = 0;
  std::size_t steps = 0;
  std::string selection;  // the merged step selection, canonical a:b:s
};
MergeResult merge_stores(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& output,
                         bool replace);

}  // namespace gs::analyzer
