// The analysis pipeline: every selected step, every vector, every fit and threshold method.
#include "gs/analyzer/analyze.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <set>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "gs/analyzer/streamed.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/timing.hpp"
#include "gs/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Timed {
  ThresholdResult result;
  std::string error;
  double seconds = 0.0;
};

Timed timed_threshold(const std::string& method, MagnitudePasses& passes, double density,
                      const FitReportOptions& o) {
  Timed t;
  t.result.method = method;
  t.result.density = density;
  const auto t0 = Clock::now();
  try {
    t.result = threshold_by_name(method, passes, density, o.stages, o.seed, o.sidco_recount);
  } catch (const DeviceFailure&) {
    throw;  // the device failed, not the method: never a row (fit_report does the same)
  } catch (const Error& e) {
    t.error = e.what();
  }
  t.seconds = seconds_since(t0);
  return t;
}

}  // namespace

void analyze_vector(MagnitudePasses& passes, const FitReportOptions& options,
                    const std::vector<std::string>& methods, std::int64_t step,
                    const std::string& scope, const std::string& kind, StepResults& into) {
  // Fits through fit_report itself (same numbers as `gradscope fit`); thresholds here, so each
  // method is timed alone.
  FitReportOptions fit_only = options;
  fit_only.methods.clear();
  const auto t0 = Clock::now();
  const FitReport rep = fit_report(passes, fit_only);
  into.vectors.push_back({step, scope, kind, rep.n, rep.zeros, rep.nonfinite, seconds_since(t0)});

  for (const auto& f : rep.fits) {
    FitRow row{step, scope, kind, f.dist, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0, false, f.error};
    if (f.error.empty()) {
      if (!f.params.empty()) row.param1 = f.params[0].second;
      if (f.params.size() > 1) row.param2 = f.params[1].second;
      row.loglik = f.loglik;
      row.aic = f.aic;
      row.ks_D = f.ks_D;
      row.ks_p = f.ks_p;
      row.ad_A2 = f.ad_A2;
      row.ks_n = f.ks_n;
      row.ks_subsampled = f.ks_subsampled;
      for (const auto& t : f.tail)
        into.tails.push_back({step, scope, f.dist, t.density, t.threshold, t.predicted, t.observed});
      for (const auto& q : f.qq)
        into.qq.push_back({step, scope, f.dist, q.probability, q.fitted, q.sample});
    }
    into.fits.push_back(std::move(row));
  }

  // Exact top-k at every density: the reference every estimate is compared with.
  std::vector<Timed> exact;
  for (double density : options.densities) exact.push_back(timed_threshold("topk", passes, density, options));
  for (const auto& method : methods)
    for (std::size_t r = 0; r < options.densities.size(); ++r) {
      const double density = options.densities[r];
      const Timed t = method == "topk" ? exact[r] : timed_threshold(method, passes, density, options);
      ThresholdRow row{step, scope, kind, method, density, kNaN, 0, 0, kNaN, kNaN, kNaN, t.seconds, t.error};
      const double ref = exact[r].error.empty() ? exact[r].result.threshold : kNaN;
      row.exact_threshold = ref;
      if (t.error.empty()) {
        row.threshold = t.result.threshold;
        row.stages = t.result.stages;
        row.selected = t.result.selected;
        row.quality = t.result.quality;
        row.rel_error = ref != 0.0 ? (t.result.threshold - ref) / ref : kNaN;
      }
      into.thresholds.push_back(std::move(row));
    }
}

namespace {

// A step's layers as the segments of the whole model. The first layers that fit in the memory
// budget are read once into one contiguous buffer (all of them when the model fits, and the whole
// model is then that buffer, as it always was); the others are read again at each use.
class StepLayers final : public SegmentSource {
 public:
  StepLayers(const data::SnapshotReader& reader, std::size_t row, std::uint64_t budget_floats,
             std::vector<float>& buffer)
      : reader_(reader), row_(row), buffer_(buffer) {
    std::uint64_t at = 0;
    for (const auto& l : reader.layers()) {
      offsets_.push_back(at);
      at += static_cast<std::uint64_t>(l.numel());
    }
    offsets_.push_back(at);
    while (cached_ < count() && offsets_[cached_ + 1] <= budget_floats) ++cached_;
    if (buffer_.size() < offsets_[cached_]) buffer_.resize(offsets_[cached_]);
    for (std::size_t l = 0; l < cached_; ++l) reader_.read(row_, l, cached(l));
  }
  std::size_t count() const override { return reader_.layers().size(); }
  std::uint64_t size(std::size_t l) const override { return offsets_[l + 1] - offsets_[l]; }
  std::span<const float> get(std::size_t l, std::vector<float>& scratch) const override {
    if (l < cached_) return cached(l);
    scratch.resize(size(l));
    reader_.read(row_, l, scratch);
    return scratch;
  }
  bool all_cached() const { return cached_ == count(); }
  std::span<const float> model() const { return {buffer_.data(), offsets_.back()}; }

 private:
  std::span<float> cached(std::size_t l) const {
    return {buffer_.data() + offsets_[l], static_cast<std::size_t>(size(l))};
  }
  const data::SnapshotReader& reader_;
  std::size_t row_;
  std::vector<float>& buffer_;
  std::vector<std::uint64_t> offsets_;
  std::size_t cached_ = 0;
};

template <class T>
void move_append(std::vector<T>& into, std::vector<T>& from) {
  into.insert(into.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

void move_append(StepResults& into, StepResults& part) {
  move_append(into.vectors, part.vectors);
  move_append(into.fits, part.fits);
  move_append(into.tails, part.tails);
  move_append(into.qq, part.qq);
  move_append(into.thresholds, part.thresholds);
}

}  // namespace

AnalyzeResult analyze(const AnalyzeConfig& config, const ProgressFn& progress) {
  config.validate();
  const auto start = Clock::now();
  kernels::BackendKind backend = kernels::resolve_backend(config.backend);
  std::error_code ec;
  if (fs::exists(config.output) && fs::equivalent(config.input, config.output, ec))
    throw Error(config.output.string() + " is the snapshot itself: choose another --out file");
  data::SnapshotReader reader(config.input);
  const auto& layers = reader.layers();

  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  std::size_t max_scope = std::string(kModelScope).size();
  for (const auto& l : layers) {
    shapes.emplace_back(l.name, l.shape);
    max_scope = std::max(max_scope, l.name.size());
  }
  const SourceIdentity source =
      source_identity(config.input, reader.meta().created, shapes, reader.meta().model);
  const StoredOptions stored = StoredOptions::from(config);

  AnalyzeResult result;
  // The output is replaced only with force; an existing one is appended to after its source and
  // options were checked (open() refuses anything else, so nothing is overwritten by mistake).
  AnalysisWriter writer = (config.force || !fs::exists(config.output))
                              ? AnalysisWriter::create(config.output, source, stored, max_scope, config.force)
                              : AnalysisWriter::open(config.output, source, stored);
  result.created = config.force || writer.steps_done().empty();

  const std::vector<std::size_t> rows = config.steps.rows(reader.step_count());
  const std::set<std::int64_t> done(writer.steps_done().begin(), writer.steps_done().end());
  std::vector<std::size_t> pending;
  for (std::size_t r : rows)
    if (!done.count(reader.steps()[r].step)) pending.push_back(r);
  result.steps_selected = rows.size();
  result.steps_skipped = rows.size() - pending.size();

  const bool per_layer = config.vectors != VectorSet::model;
  const bool whole = config.vectors != VectorSet::layers;
  const std::size_t per_step = (per_layer ? layers.size() : 0) + (whole ? 1 : 0);
  const auto total = static_cast<std::int64_t>(pending.size() * per_step);
  const FitReportOptions options = config.fit_options();
  std::vector<std::string> kinds;
  for (const auto& l : layers) kinds.push_back(layer_kind(l));
  const std::uint64_t budget_floats = config.memory_mib * (std::uint64_t{1} << 20) / sizeof(float);

  std::vector<float> buffer;  // the cached layers, reused step after step
  std::int64_t vectors_done = 0;
  std::mutex progress_mutex;
  auto tick = [&](std::int64_t step, const std::string& scope) {
    std::lock_guard lock(progress_mutex);
    ++vectors_done;
    if (progress) progress(vectors_done, total, "step " + std::to_string(step) + " " + scope);
  };
  if (progress) progress(0, total, "");

  // One step's results on the backend (no I/O but reading the snapshot).
  auto analyze_step = [&](std::size_t row, const data::StepRecord& rec, kernels::BackendKind on) {
    StepResults res;
    // The GPU takes one vector at a time; the CPU analyses layers in parallel, each on one thread.
    const int jobs = on == kernels::BackendKind::cpu ? config.threads() : 1;
    const StepLayers step_layers(reader, row, budget_floats, buffer);
    // On two cores the whole model in memory joins the layers' pool as its first task (the
    // largest): its passes run on one thread while the other core takes layers, instead of the
    // layers waiting for its less parallel parts (sampling, sorting, searches). The model and the
    // layers hold the same values, so on one thread the model takes about half the step's work:
    // with more cores that one thread would outlast the layers, and the model goes first on all.
    const bool model_in_pool = whole && per_layer && jobs == 2 && step_layers.all_cached();
    if (whole && !model_in_pool) {
      // In memory when the model fits the budget (on any backend), else streamed layer by layer.
      std::unique_ptr<MagnitudePasses> passes;
      if (step_layers.all_cached()) passes = kernels::make_passes(step_layers.model(), on);
      else passes = std::make_unique<StreamedPasses>(step_layers);
      analyze_vector(*passes, options, config.methods, rec.step, kModelScope, kKindModel, res);
      tick(rec.step, kModelScope);
    }
    if (per_layer) {
      // Task 0 is the model when it is in the pool; task i (+1) is layer i.
      const std::size_t first_layer = model_in_pool ? 1 : 0;
      const std::size_t tasks = layers.size() + first_layer;
      std::vector<StepResults> parts(tasks);
      std::vector<std::exception_ptr> errors(tasks);
#pragma omp parallel num_threads(jobs)
      {
        // A vector's passes run on its own thread alone: the vectors are the parallel work.
#if defined(_OPENMP)
        omp_set_num_threads(1);
#endif
        std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(tasks); ++i) {
          const auto t = static_cast<std::size_t>(i);
          try {
            if (t < first_layer) {
              auto passes = kernels::make_passes(step_layers.model(), on);
              analyze_vector(*passes, options, config.methods, rec.step, kModelScope, kKindModel, parts[t]);
              tick(rec.step, kModelScope);
              continue;
            }
            const std::size_t l = t - first_layer;
            auto passes = kernels::make_passes(step_layers.get(l, scratch), on);
            analyze_vector(*passes, options, config.methods, rec.step, layers[l].name, kinds[l], parts[t]);
            tick(rec.step, layers[l].name);
          } catch (...) {
            errors[t] = std::current_exception();
          }
        }
      }
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
      for (auto& part : parts) move_append(res, part);
    }
    return res;
  };

  for (std::size_t row : pending) {
    const auto t0 = Clock::now();
    const data::StepRecord& rec = reader.steps()[row];
    const std::int64_t done_before = vectors_done;
    StepResults res;
    try {
      res = analyze_step(row, rec, backend);
    } catch (const DeviceFailure& e) {
      // The device failed during this step (nothing of it is written). Stop: the steps written so
      // far stay, and a later run adds the rest. Or, asked to, analyse this step again on the CPU,
      // and the remaining steps there too: a device that failed once is not tried again.
      if (config.on_device_error != "cpu" || backend == kernels::BackendKind::cpu) throw;
      result.device_error = e.what();
      result.device_error_backend = std::string(kernels::to_string(backend));
      result.device_error_step = rec.step;
      backend = kernels::BackendKind::cpu;
      vectors_done = done_before;  // this step's vectors count again
      res = analyze_step(row, rec, backend);
    }
    res.step = {rec.step, row, rec.loss, rec.lr, seconds_since(t0)};
    writer.append(res);
    ++result.steps_analyzed;
  }
  result.backend = std::string(kernels::to_string(backend));
  result.vectors_analyzed = static_cast<std::size_t>(vectors_done);
  writer.close();
  result.seconds = seconds_since(start);
  return result;
}

void export_outputs(const AnalyzeConfig& config, const AnalysisReader& reader, const PlotHook& plots) {
  if (!config.csv_dir.empty()) export_csv(reader, config.csv_dir, config.force);
  if (!config.report_dir.empty()) {
    const fs::path file = config.report_dir / "report.md";
    if (fs::exists(file) && !config.force)
      throw Error(file.string() + ": already exists; pass --force to replace it");
    std::error_code ec;
    fs::create_directories(config.report_dir, ec);
    if (ec) throw Error(config.report_dir.string() + ": cannot create the folder: " + ec.message());
    const AnalysisSummary s = summarize(reader);
    // The hook refuses to replace its own files unless forced, before it draws any.
    const ReportPlots images =
        plots ? plots(reader, config.report_dir, config.force) : ReportPlots{{}, {kNoPlotsNote}};
    std::ofstream out(file);
    out << markdown_report(reader, s, images);
    if (!out) throw Error(file.string() + ": cannot write the report");
  }
}

nlohmann::json analyze_json(const AnalyzeResult& r, const AnalysisReader& reader,
                            const AnalysisSummary& summary) {
  nlohmann::json j{{"source", reader.source().path},
                   {"output", reader.path().string()},
                   {"created", r.created},
                   {"steps_selected", r.steps_selected},
                   {"steps_skipped", r.steps_skipped},
                   {"steps_analyzed", r.steps_analyzed},
                   {"vectors_analyzed", r.vectors_analyzed},
                   {"backend", r.backend},
                   {"seconds", r.seconds},
                   {"summary", summary_json(summary)}};
  if (!r.device_error.empty()) {  // the steps from device_error_step on ran on the CPU
    j["device_error"] = r.device_error;
    j["device_error_backend"] = r.device_error_backend;
    j["device_error_step"] = r.device_error_step;
  }
  return j;
}

AnalysisSummary analyze_and_summarize(AnalyzeConfig config, std::ostream& out,
                                      const ProgressFn& progress) {
  config.force = true;
  analyze(config, progress);
  const AnalysisReader reader(config.output);
  AnalysisSummary s = summarize(reader);
  print_summary(out, s);
  return s;
}

}  // namespace gs::analyzer
