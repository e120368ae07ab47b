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
#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Timed {
  fitting::ThresholdResult result;
  std::string error;
  double seconds = 0.0;
};

Timed timed_threshold(const std::string& method, fitting::MagnitudePasses& passes, double density,
                      const fitting::FitReportOptions& o) {
  Timed t;
  t.result.method = method;
  t.result.density = density;
  const auto t0 = Clock::now();
  try {
    t.result = fitting::threshold_by_name(method, passes, density, o.stages, o.seed, o.sidco);
  } catch (const DeviceFailure&) {
    throw;  // the device failed, not the method: never a row (fit_report does the same)
  } catch (const Error& e) {
    t.error = e.what();
  }
  t.seconds = seconds_since(t0);
  return t;
}

}  // namespace

void analyze_vector(fitting::MagnitudePasses& passes, const fitting::FitReportOptions& options,
                    const std::vector<std::string>& methods, std::int64_t step, const std::string& scope,
                    const std::string& kind, StepResults& into) {
  // Fits through fit_report itself (same numbers as `gradscope fit`); thresholds here, so each
  // method is timed alone.
  fitting::FitReportOptions fit_only = options;
  fit_only.methods.clear();
  const auto t0 = Clock::now();
  const fitting::FitReport rep = fitting::fit_report(passes, fit_only);
  into.vectors.push_back({step, scope, kind, rep.n, rep.zeros, rep.nonfinite, seconds_since(t0)});

  for (const auto& f : rep.fits) {
    if (f.error.empty()) {
      for (const auto& t : f.tail)
        into.tails.push_back({step, scope, f.dist, t.density, t.threshold, t.predicted, t.observed});
      for (const auto& q : f.qq) into.qq.push_back({step, scope, f.dist, q.probability, q.fitted, q.sample});
    }
    into.fits.push_back(to_fit_row(f, step, scope, kind));
  }

  // Exact top-k at every density: the reference every estimate is compared with.
  std::vector<Timed> exact;
  for (double density : options.densities) exact.push_back(timed_threshold("topk", passes, density, options));
  for (const auto& method : methods)
    for (std::size_t r = 0; r < options.densities.size(); ++r) {
      const double density = options.densities[r];
      const Timed t = method == "topk" ? exact[r] : timed_threshold(method, passes, density, options);
      ThresholdRow row{step, scope,     kind,    method, density,
                       kNaN, 0,         0,       kNaN,   kNaN,
                       kNaN, t.seconds, t.error, rep.n,  too_small_for_quality(rep.n, density)};
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

StepPlan plan_step(std::span<const std::uint64_t> layer_sizes, bool whole, bool per_layer, int jobs,
                   bool model_in_memory) {
  StepPlan plan;
  std::uint64_t layers_work = 0;
  for (std::uint64_t n : layer_sizes) layers_work += n;
  // The model's vector holds the layers' values: on one thread it takes about the layers' work.
  const std::uint64_t model_work = layers_work;
  const std::uint64_t step_work = (whole ? model_work : 0) + (per_layer ? layers_work : 0);
  const bool pooled =
      whole && per_layer && model_in_memory && model_work * std::uint64_t(std::max(jobs, 1)) <= step_work;
  plan.model_alone = whole && !pooled;
  if (pooled) plan.tasks.push_back(StepPlan::kModel);
  if (per_layer) {
    std::vector<std::ptrdiff_t> layers(layer_sizes.size());
    for (std::size_t l = 0; l < layers.size(); ++l) layers[l] = std::ptrdiff_t(l);
    std::stable_sort(layers.begin(), layers.end(), [&](std::ptrdiff_t a, std::ptrdiff_t b) {
      return layer_sizes[std::size_t(a)] > layer_sizes[std::size_t(b)];
    });
    plan.tasks.insert(plan.tasks.end(), layers.begin(), layers.end());
  }
  return plan;
}

namespace {

// One step's vectors on a backend, as plan_step orders them (no I/O but reading the snapshot).
class StepAnalyzer {
 public:
  StepAnalyzer(const AnalyzeConfig& config, const data::SnapshotReader& reader, std::int64_t total,
               const ProgressFn& progress)
      : config_(config),
        reader_(reader),
        options_(config.fit_options()),
        total_(total),
        progress_(progress),
        per_layer_(config.vectors != VectorSet::model),
        whole_(config.vectors != VectorSet::layers),
        budget_floats_(config.memory_mib * (std::uint64_t{1} << 20) / sizeof(float)) {
    kinds_ = layer_kinds(reader.layers());
    for (const auto& l : reader.layers()) sizes_.push_back(std::uint64_t(l.numel()));
    if (progress_) progress_(0, total_, "");
  }

  std::int64_t vectors_done() const { return done_; }
  void set_vectors_done(std::int64_t done) { done_ = done; }

  StepResults run(std::size_t row, const data::StepRecord& rec, kernels::BackendKind on) {
    // The GPU takes one vector at a time; the CPU analyses vectors in parallel, each on one thread.
    const int jobs = on == kernels::BackendKind::cpu ? config_.threads() : 1;
    const StepLayers layers(reader_, row, budget_floats_, buffer_);
    const StepPlan plan = plan_step(sizes_, whole_, per_layer_, jobs, layers.all_cached());
    StepResults res;
    if (plan.model_alone) {
      // In memory when the model fits the budget (on any backend), else streamed layer by layer.
      std::unique_ptr<fitting::MagnitudePasses> passes;
      if (layers.all_cached())
        passes = kernels::make_passes(layers.model(), on);
      else
        passes = std::make_unique<StreamedPasses>(layers);
      vector(*passes, rec.step, kModelScope, kKindModel, res);
    }
    run_pool(plan.tasks, layers, rec.step, on, jobs, res);
    return res;
  }

 private:
  void vector(fitting::MagnitudePasses& passes, std::int64_t step, const std::string& scope, const std::string& kind,
              StepResults& into) {
    analyze_vector(passes, options_, config_.methods, step, scope, kind, into);
    std::lock_guard lock(progress_mutex_);
    ++done_;
    if (progress_) progress_(done_, total_, "step " + std::to_string(step) + " " + scope);
  }

  // The pool's tasks on `jobs` threads; their results go into res in the store's order (the model,
  // then the layers in order), whatever order they ran in.
  void run_pool(const std::vector<std::ptrdiff_t>& tasks, const StepLayers& layers, std::int64_t step,
                kernels::BackendKind on, int jobs, StepResults& res) {
    const std::size_t slots = sizes_.size() + 1;  // slot 0: the model; slot l + 1: layer l
    std::vector<StepResults> parts(slots);
    std::vector<std::exception_ptr> errors(slots);
#pragma omp parallel num_threads(jobs)
    {
      // A vector's passes run on its own thread alone: the vectors are the parallel work.
#if defined(_OPENMP)
      omp_set_num_threads(1);
#endif
      std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(tasks.size()); ++i) {
        const std::ptrdiff_t task = tasks[std::size_t(i)];
        const std::size_t slot = std::size_t(task + 1);
        try {
          if (task == StepPlan::kModel) {
            auto passes = kernels::make_passes(layers.model(), on);
            vector(*passes, step, kModelScope, kKindModel, parts[slot]);
          } else {
            const auto l = std::size_t(task);
            auto passes = kernels::make_passes(layers.get(l, scratch), on);
            vector(*passes, step, reader_.layers()[l].name, kinds_[l], parts[slot]);
          }
        } catch (...) {
          errors[slot] = std::current_exception();
        }
      }
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (auto& part : parts) move_append(res, part);
  }

  const AnalyzeConfig& config_;
  const data::SnapshotReader& reader_;
  const fitting::FitReportOptions options_;
  const std::int64_t total_;
  const ProgressFn& progress_;
  const bool per_layer_, whole_;
  const std::uint64_t budget_floats_;
  std::vector<std::string> kinds_;
  std::vector<std::uint64_t> sizes_;
  std::vector<float> buffer_;  // the cached layers, reused step after step
  std::int64_t done_ = 0;
  std::mutex progress_mutex_;
};

// The store analyze() writes: new (or replaced, with force), or an existing one of the same
// source and options to append to (open() refuses anything else, so nothing is overwritten by
// mistake).
AnalysisWriter open_store(const AnalyzeConfig& config, const data::SnapshotReader& reader) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  std::size_t max_scope = std::string(kModelScope).size();
  for (const auto& l : reader.layers()) {
    shapes.emplace_back(l.name, l.shape);
    max_scope = std::max(max_scope, l.name.size());
  }
  const SourceIdentity source = source_identity(config.input, reader.meta().created, shapes, reader.meta().model);
  const StoredOptions stored = StoredOptions::from(config);
  return (config.force || !fs::exists(config.output))
             ? AnalysisWriter::create(config.output, source, stored, max_scope, config.force)
             : AnalysisWriter::open(config.output, source, stored);
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
  const std::vector<std::size_t> rows = config.steps.rows(reader.steps());  // gs::Error when none
  AnalysisWriter writer = open_store(config, reader);
  AnalyzeResult result;
  result.created = config.force || writer.steps_done().empty();
  // An existing store's lists in its own order, so that every step's rows come alike.
  AnalyzeConfig in_order = config;
  in_order.densities = writer.options().densities;
  in_order.dists = writer.options().dists;
  in_order.methods = writer.options().methods;

  const std::set<std::int64_t> done(writer.steps_done().begin(), writer.steps_done().end());
  std::vector<std::size_t> pending;
  for (std::size_t r : rows)
    if (!done.count(reader.steps()[r].step)) pending.push_back(r);
  result.steps_selected = rows.size();
  result.steps_skipped = rows.size() - pending.size();
  const std::size_t per_step =
      (config.vectors != VectorSet::model ? reader.layers().size() : 0) + (config.vectors != VectorSet::layers ? 1 : 0);
  StepAnalyzer steps(in_order, reader, static_cast<std::int64_t>(pending.size() * per_step), progress);

  for (std::size_t row : pending) {
    const auto t0 = Clock::now();
    const data::StepRecord& rec = reader.steps()[row];
    const std::int64_t done_before = steps.vectors_done();
    StepResults res;
    try {
      res = steps.run(row, rec, backend);
    } catch (const DeviceFailure& e) {
      // The device failed during this step (nothing of it is written). Stop: the steps written so
      // far stay, and a later run adds the rest. Or, asked to, analyse this step again on the CPU,
      // and the remaining steps there too: a device that failed once is not tried again.
      if (config.on_device_error != "cpu" || backend == kernels::BackendKind::cpu) throw;
      result.device_error = e.what();
      result.device_error_backend = std::string(kernels::to_string(backend));
      result.device_error_step = rec.step;
      backend = kernels::BackendKind::cpu;
      steps.set_vectors_done(done_before);  // this step's vectors count again
      res = steps.run(row, rec, backend);
    }
    writer.write_rows(res);
    // Reads, fits, thresholds and the rows' writes: all the step costs but its commit and flush.
    res.step = {rec.step, row, rec.loss, rec.lr, seconds_since(t0)};
    writer.commit(res.step);
    ++result.steps_analyzed;
  }
  result.backend = std::string(kernels::to_string(backend));
  result.vectors_analyzed = static_cast<std::size_t>(steps.vectors_done());
  writer.close();
  result.seconds = seconds_since(start);
  return result;
}

void export_outputs(const AnalyzeConfig& config, const AnalysisReader& reader, const PlotHook& plots) {
  if (!config.csv_dir.empty()) export_csv(reader, config.csv_dir, config.force);
  if (!config.report_dir.empty()) {
    const fs::path file = config.report_dir / "report.md";
    if (fs::exists(file) && !config.force) throw Error(file.string() + ": already exists; pass --force to replace it");
    std::error_code ec;
    fs::create_directories(config.report_dir, ec);
    if (ec) throw Error(config.report_dir.string() + ": cannot create the folder: " + ec.message());
    const AnalysisSummary s = summarize(reader);
    // The hook refuses to replace its own files unless forced, before it draws any.
    const ReportPlots images = plots ? plots(reader, config.report_dir, config.force) : ReportPlots{{}, {kNoPlotsNote}};
    std::ofstream out(file);
    out << markdown_report(reader, s, images);
    if (!out) throw Error(file.string() + ": cannot write the report");
  }
}

nlohmann::json analyze_json(const AnalyzeResult& r, const AnalysisReader& reader, const AnalysisSummary& summary) {
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

AnalysisSummary analyze_and_summarize(AnalyzeConfig config, std::ostream& out, const ProgressFn& progress) {
  config.force = true;
  analyze(config, progress);
  const AnalysisReader reader(config.output);
  AnalysisSummary s = summarize(reader);
  print_summary(out, s);
  return s;
}

}  // namespace gs::analyzer
