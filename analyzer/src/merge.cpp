// Merging the stores of shards of one analysis into the store one run would have written.
#include <algorithm>
#include <filesystem>
#include <map>

#include "gs/analyzer/store.hpp"
#include "gs/base/error.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;

struct Shard {
  fs::path path;
  StepSelection::Piece steps;  // the shard's selection, one slice
  std::unique_ptr<AnalysisReader> reader;
};

// The selection the shards tile, sorted by their first step; gs::Error when they do not.
StepSelection::Piece tiled_selection(std::vector<Shard>& shards) {
  std::sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) { return a.steps.first < b.steps.first; });
  StepSelection::Piece whole = shards.front().steps;
  for (std::size_t i = 1; i < shards.size(); ++i) {
    const Shard& prev = shards[i - 1];
    const Shard& next = shards[i];
    const std::string pair = prev.path.string() + " (steps " + prev.steps.to_string() + ") and " + next.path.string() +
                             " (steps " + next.steps.to_string() + ")";
    if (next.steps.stride != whole.stride)
      throw Error("cannot merge " + pair + ": their strides differ; shards of one run share a:b:s's s");
    if (!prev.steps.last || *prev.steps.last != next.steps.first ||
        (*prev.steps.last - prev.steps.first) % whole.stride != 0)
      throw Error("cannot merge " + pair +
                  ": the first must end where the second begins, after a "
                  "whole number of strides (e.g. --steps 0:50:5 and --steps 50:100:5)");
  }
  whole.last = shards.back().steps.last;
  return whole;
}

template <class Row>
void take_step(std::vector<Row>& into, const std::vector<Row>& rows, std::int64_t step) {
  for (const Row& r : rows)
    if (r.step == step) into.push_back(r);
}

}  // namespace

MergeResult merge_stores(const std::vector<fs::path>& paths, const fs::path& output, bool replace) {
  if (paths.empty()) throw Error("no analysis file to merge: name the shards' files");
  std::vector<Shard> shards;
  for (const fs::path& p : paths) {
    std::error_code ec;
    if (fs::exists(output) && fs::equivalent(p, output, ec))
      throw Error(output.string() + " is one of the shards: choose another --out file");
    auto reader = std::make_unique<AnalysisReader>(p);
    if (reader->format_version() != kAnalysisFormatVersion)
      throw Error("cannot merge " + p.string() + ": it was made by an older gradscope (analysis format version " +
                  std::to_string(reader->format_version()) +
                  ", whose steps are rows); analyse its steps again "
                  "with --force");
    const auto slice = StepSelection::parse(reader->options().steps).single_slice();
    if (!slice)
      throw Error("cannot merge " + p.string() + ": its steps (" + reader->options().steps +
                  ") are no one slice a:b:s; merge shards that each analysed one slice");
    shards.push_back({p, *slice, std::move(reader)});
  }
  const Shard& first = shards.front();
  const SourceIdentity source = first.reader->source();
  StoredOptions options = first.reader->options();
  for (const Shard& s : shards) {
    const SourceIdentity& src = s.reader->source();
    // As on appending: the path is informative (each machine may hold its own copy).
    if (src.created != source.created || src.layers_hash != source.layers_hash || src.model != source.model)
      throw Error("cannot merge " + s.path.string() + ": it analysed another snapshot (" + src.path + ", created " +
                  src.created + ", layers " + src.layers_hash + ") than " + first.path.string() + " (" + source.path +
                  ", created " + source.created + ", layers " + source.layers_hash + ")");
    if (!s.reader->options().same_analysis(options))
      throw Error("cannot merge " + s.path.string() + ": it was made with other options (" +
                  s.reader->options().describe() + ") than " + first.path.string() + " (" +
                  first.reader->options().describe() + ")");
  }
  options.steps = tiled_selection(shards).to_string();

  // Every committed step of every shard, in snapshot row order (a single run's order).
  std::map<std::uint64_t, std::pair<const Shard*, StepRow>> steps;
  for (const Shard& s : shards)
    for (const StepRow& r : s.reader->steps()) steps.emplace(r.row, std::make_pair(&s, r));

  AnalysisWriter writer = AnalysisWriter::create(output, source, options, first.reader->scope_width(), replace);
  const Shard* loaded = nullptr;
  std::vector<VectorRow> vectors;
  std::vector<FitRow> fits;
  std::vector<TailRow> tails;
  std::vector<QQRow> qq;
  std::vector<ThresholdRow> thresholds;
  for (const auto& [row, entry] : steps) {
    const auto& [shard, step] = entry;
    if (shard != loaded) {  // one shard's tables at a time
      vectors = shard->reader->vectors();
      fits = shard->reader->fits();
      tails = shard->reader->tails();
      qq = shard->reader->qq();
      thresholds = shard->reader->thresholds();
      loaded = shard;
    }
    StepResults r;
    r.step = step;
    take_step(r.vectors, vectors, step.step);
    take_step(r.fits, fits, step.step);
    take_step(r.tails, tails, step.step);
    take_step(r.qq, qq, step.step);
    take_step(r.thresholds, thresholds, step.step);
    writer.append(r);
  }
  writer.close();
  return {shards.size(), steps.size(), options.steps};
}

}  // namespace gs::analyzer
