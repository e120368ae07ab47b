// The analysis store: creating, appending to and reading an analysis file.
#include "gs/analyzer/store.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "gs/base/join.hpp"
#include "gs/data/h5_handles.hpp"
#include "gs/version.hpp"
#include "store_tables.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& v) { return join(v, ","); }
std::vector<std::string> split(const std::string& s) {
  const auto items = split_list(s);
  return {items.begin(), items.end()};
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_root(hid_t f, const SourceIdentity& src, const StoredOptions& o, const fs::path& file) {
  h5::write_string_attr(f, "format", kAnalysisFormat, file);
  h5::write_i64_attr(f, "format_version", kAnalysisFormatVersion, file);
  h5::write_string_attr(f, "created", now_utc(), file);
  h5::write_string_attr(f, "gradscope_version", kVersion, file);
  h5::write_string_attr(f, "source_path", src.path, file);
  h5::write_string_attr(f, "source_created", src.created, file);
  h5::write_string_attr(f, "source_layers_hash", src.layers_hash, file);
  h5::write_string_attr(f, "source_model", src.model, file);
  h5::write_f64_array_attr(f, "ratios", o.densities, file);
  h5::write_string_attr(f, "dists", joined(o.dists), file);
  h5::write_string_attr(f, "methods", joined(o.methods), file);
  h5::write_string_attr(f, "granularity", o.granularity, file);
  h5::write_string_attr(f, "steps", o.steps, file);
  h5::write_i64_attr(f, "stages", o.stages, file);
  h5::write_u64_attr(f, "ks_max_points", o.ks_max_points, file);
  h5::write_u64_attr(f, "seed", o.seed, file);
  h5::write_i64_attr(f, "qq_points", o.qq_points, file);
  h5::write_string_attr(f, "param_names", param_names_attribute(), file);
}

// Checks what an open file is (format and version); gs::Error naming the file otherwise.
h5::Handle checked_analysis(h5::Handle f, const fs::path& path) {
  if (!h5::has_attr(f.get(), "format"))
    throw Error(path.string() + ": not a gradscope analysis file (no 'format' attribute)");
  const std::string format = h5::read_string_attr(f.get(), "format", path);
  if (format != kAnalysisFormat)
    throw Error(path.string() + ": not a gradscope analysis file (format is '" + format + "')");
  const auto version = h5::read_i64_attr(f.get(), "format_version", path);
  if (version < kOldestAnalysisFormatVersion || version > kAnalysisFormatVersion)
    throw Error(path.string() + ": analysis format version " + std::to_string(version) +
                " is not supported; this build reads versions " + std::to_string(kOldestAnalysisFormatVersion) +
                " to " + std::to_string(kAnalysisFormatVersion));
  return f;
}

// Opens an existing analysis file after checking what it is; gs::Error naming the file otherwise.
h5::Handle open_file(const fs::path& path, bool write) {
  h5::silence();
  if (!fs::exists(path)) throw MissingFile(path.string() + ": no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path.string() + ": not an HDF5 file (or it is truncated)");
  return checked_analysis(h5::checked(H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT),
                                      H5Fclose, path, "cannot open"),
                          path);
}

SourceIdentity read_source(hid_t f, const fs::path& file) {
  return {h5::read_string_attr(f, "source_path", file), h5::read_string_attr(f, "source_created", file),
          h5::read_string_attr(f, "source_layers_hash", file), h5::read_string_attr(f, "source_model", file)};
}

StoredOptions read_options(hid_t f, const fs::path& file) {
  StoredOptions o;
  o.densities = h5::read_f64_array_attr(f, "ratios", file);
  o.dists = split(h5::read_string_attr(f, "dists", file));
  o.methods = split(h5::read_string_attr(f, "methods", file));
  o.granularity = h5::read_string_attr(f, "granularity", file);
  o.steps = h5::read_string_attr(f, "steps", file);
  o.stages = static_cast<int>(h5::read_i64_attr(f, "stages", file));
  o.ks_max_points = h5::read_u64_attr(f, "ks_max_points", file);
  o.seed = h5::read_u64_attr(f, "seed", file);
  o.qq_points = static_cast<int>(h5::read_i64_attr(f, "qq_points", file));
  return o;
}

std::vector<std::int64_t> read_step_column(hid_t f, const char* table, const fs::path& file) {
  std::uint64_t rows = 0;
  const auto bytes = h5::read_rows(f, table, tables::step_column(), &rows, file);
  std::vector<std::int64_t> steps(static_cast<std::size_t>(rows));
  if (rows) std::memcpy(steps.data(), bytes.data(), bytes.size());
  return steps;
}

template <class Row, class... W>
std::vector<Row> read_table(hid_t f, const char* table, const std::vector<h5::Field>& fields,
                            const std::set<std::int64_t>& committed, const fs::path& file, const W&... widths) {
  std::uint64_t rows = 0;
  const auto bytes = h5::read_rows(f, table, fields, &rows, file);
  std::vector<Row> out;
  out.reserve(static_cast<std::size_t>(rows));
  h5::Unpacker u(bytes.data());
  for (std::uint64_t i = 0; i < rows; ++i) {
    Row r;
    tables::unpack(u, r, widths...);
    if (committed.count(r.step)) out.push_back(std::move(r));
  }
  return out;
}

// The committed rows of packed `bytes` as one column per field.
std::vector<Column> columns_of(const std::vector<char>& bytes, std::uint64_t rows, const std::vector<h5::Field>& fields,
                               const std::set<std::int64_t>& committed) {
  std::vector<Column> out(fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    out[i].name = fields[i].name;
    switch (fields[i].type) {
      case h5::FieldType::i64:
        out[i].values = std::vector<std::int64_t>{};
        break;
      case h5::FieldType::u64:
        out[i].values = std::vector<std::uint64_t>{};
        break;
      case h5::FieldType::i32:
        out[i].values = std::vector<std::int32_t>{};
        break;
      case h5::FieldType::u8:
        out[i].values = std::vector<std::uint8_t>{};
        break;
      case h5::FieldType::f64:
        out[i].values = std::vector<double>{};
        break;
      case h5::FieldType::str:
        out[i].values = std::vector<std::string>{};
        break;
    }
  }
  const std::size_t size = h5::row_size(fields);
  for (std::uint64_t r = 0; r < rows; ++r) {
    h5::Unpacker u(bytes.data() + r * size);
    if (!committed.count(h5::Unpacker(bytes.data() + r * size).get<std::int64_t>())) continue;
    for (std::size_t i = 0; i < fields.size(); ++i)
      std::visit(
          [&](auto& v) {
            using T = typename std::decay_t<decltype(v)>::value_type;
            if constexpr (std::is_same_v<T, std::string>)
              v.push_back(u.str(fields[i].width));
            else
              v.push_back(u.get<T>());
          },
          out[i].values);
  }
  return out;
}

}  // namespace

SourceIdentity source_identity(const fs::path& path, const std::string& created,
                               const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& layers,
                               const std::string& model) {
  // FNV-1a 64 over "name:d0,d1,..;" per layer: changes when any name, shape or order changes.
  std::uint64_t h = 1469598103934665603ULL;
  auto feed = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  for (const auto& [name, shape] : layers) {
    std::string s = name + ":";
    for (auto d : shape) s += std::to_string(d) + ",";
    feed(s + ";");
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return {fs::absolute(path).lexically_normal().string(), created, hex, model};
}

StoredOptions StoredOptions::from(const AnalyzeConfig& c) {
  StoredOptions o;
  o.densities = c.densities;
  o.dists = c.dists;
  o.methods = c.methods;
  o.granularity = to_string(c.vectors);
  o.steps = c.steps.to_string();
  o.stages = c.stages;
  o.ks_max_points = c.ks_max_points;
  o.seed = c.seed;
  o.qq_points = c.qq_points;
  return o;
}

bool StoredOptions::same_analysis(const StoredOptions& other) const {
  auto as_set = [](StoredOptions o) {
    std::sort(o.densities.begin(), o.densities.end());
    std::sort(o.dists.begin(), o.dists.end());
    std::sort(o.methods.begin(), o.methods.end());
    o.steps.clear();
    return o;
  };
  return as_set(*this) == as_set(other);
}

std::string StoredOptions::describe() const {
  std::ostringstream s;
  s << "ratios=";
  for (std::size_t i = 0; i < densities.size(); ++i) s << (i ? "," : "") << densities[i];
  s << " dists=" << joined(dists) << " methods=" << joined(methods) << " granularity=" << granularity
    << " steps=" << steps << " stages=" << stages << " ks_max_points=" << ks_max_points << " seed=" << seed
    << " qq_points=" << qq_points;
  return s.str();
}

// ---- writer ------------------------------------------------------------------------------------

struct AnalysisWriter::Impl {
  fs::path path;
  h5::Handle file;
  StoredOptions options;
  tables::Widths widths;
  std::vector<std::int64_t> steps_done;
};

AnalysisWriter::AnalysisWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AnalysisWriter::~AnalysisWriter() = default;
AnalysisWriter::AnalysisWriter(AnalysisWriter&&) noexcept = default;
AnalysisWriter& AnalysisWriter::operator=(AnalysisWriter&&) noexcept = default;

AnalysisWriter AnalysisWriter::create(const fs::path& path, const SourceIdentity& source, const StoredOptions& options,
                                      std::size_t max_scope_chars, bool replace) {
  h5::silence();
  if (fs::exists(path) && !replace) throw Error(path.string() + ": already exists; pass --force to replace it");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = h5::checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, path,
                           "cannot create the analysis file");
  impl->widths.scope = std::max<std::size_t>(max_scope_chars, 8);
  impl->options = options;
  const hid_t f = impl->file.get();
  write_root(f, source, options, path);
  const auto& w = impl->widths;
  h5::create_table(f, tables::kSteps, tables::fields<StepRow>(), path);
  h5::create_table(f, tables::kVectors, tables::fields<VectorRow>(w), path);
  h5::create_table(f, tables::kFits, tables::fields<FitRow>(w), path);
  h5::create_table(f, tables::kTails, tables::fields<TailRow>(w), path);
  h5::create_table(f, tables::kQQ, tables::fields<QQRow>(w), path);
  h5::create_table(f, tables::kThresholds, tables::fields<ThresholdRow>(w), path);
  h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), path, "flush");
  return AnalysisWriter(std::move(impl));
}

AnalysisWriter AnalysisWriter::open(const fs::path& path, const SourceIdentity& source, const StoredOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = open_file(path, true);
  const hid_t f = impl->file.get();
  const SourceIdentity stored = read_source(f, path);
  // The path is informative: a moved or copied snapshot is the same run when its creation time
  // and layer list agree.
  if (stored.created != source.created || stored.layers_hash != source.layers_hash || stored.model != source.model)
    throw Error(path.string() + ": holds the analysis of another snapshot (" + stored.path + ", created " +
                stored.created + ", layers " + stored.layers_hash + ") than " + source.path + " (created " +
                source.created + ", layers " + source.layers_hash +
                "); pass --force to replace it, or choose another --out");
  if (h5::read_i64_attr(f, "format_version", path) != kAnalysisFormatVersion)
    throw Error(path.string() + ": was made by an older gradscope (analysis format version " +
                std::to_string(h5::read_i64_attr(f, "format_version", path)) +
                ": its steps are rows, its thresholds have no n and too_small); pass --force to recompute "
                "it, or choose another --out");
  StoredOptions had = read_options(f, path);
  if (!had.same_analysis(options))
    throw Error(path.string() + ": was made with other options (" + had.describe() + ") than this run's (" +
                options.describe() + "); pass --force to recompute it with the new options, or choose another --out");
  const std::string steps = StepSelection::parse(had.steps).joined(StepSelection::parse(options.steps)).to_string();
  if (steps != had.steps) {
    h5::check(H5Adelete(f, "steps"), path, "replace the steps attribute");
    h5::write_string_attr(f, "steps", steps, path);
    had.steps = steps;
  }
  impl->options = had;
  impl->widths = tables::read_widths(f, path);
  impl->steps_done = read_step_column(f, tables::kSteps, path);
  // Drop rows of a step cut off before its /steps row (the commit record) was written.
  const std::set<std::int64_t> committed(impl->steps_done.begin(), impl->steps_done.end());
  for (const char* t : tables::kAll) {
    const auto col = read_step_column(f, t, path);
    std::size_t keep = col.size();
    while (keep > 0 && !committed.count(col[keep - 1])) --keep;
    if (keep != col.size()) h5::truncate_table(f, t, keep, path);
  }
  return AnalysisWriter(std::move(impl));
}

const std::vector<std::int64_t>& AnalysisWriter::steps_done() const { return impl_->steps_done; }
const StoredOptions& AnalysisWriter::options() const { return impl_->options; }

void AnalysisWriter::append(const StepResults& r) {
  write_rows(r);
  commit(r.step);
}

void AnalysisWriter::write_rows(const StepResults& r) {
  const hid_t f = impl_->file.get();
  const auto& w = impl_->widths;
  const auto& path = impl_->path;
  auto write = [&](const char* table, const std::vector<h5::Field>& fields, const auto& rows) {
    std::vector<char> bytes;
    bytes.reserve(rows.size() * h5::row_size(fields));
    h5::Packer p(bytes);
    for (const auto& row : rows) tables::pack(p, row, w);
    h5::append_rows(f, table, fields, bytes, rows.size(), path);
  };
  write(tables::kVectors, tables::fields<VectorRow>(w), r.vectors);
  write(tables::kFits, tables::fields<FitRow>(w), r.fits);
  write(tables::kTails, tables::fields<TailRow>(w), r.tails);
  write(tables::kQQ, tables::fields<QQRow>(w), r.qq);
  write(tables::kThresholds, tables::fields<ThresholdRow>(w), r.thresholds);
}

void AnalysisWriter::commit(const StepRow& step) {
  const hid_t f = impl_->file.get();
  std::vector<char> bytes;
  h5::Packer p(bytes);
  tables::pack(p, step);
  h5::append_rows(f, tables::kSteps, tables::fields<StepRow>(), bytes, 1, impl_->path);
  h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), impl_->path, "flush");
  impl_->steps_done.push_back(step.step);
}

void AnalysisWriter::close() {
  if (impl_ && impl_->file.reset() < 0) h5::fail(impl_->path, "close");
}

// ---- reader ------------------------------------------------------------------------------------

struct AnalysisReader::Impl {
  fs::path path;
  h5::Handle file;
  SourceIdentity source;
  StoredOptions options;
  std::string created;
  int version = kAnalysisFormatVersion;
  tables::Widths widths;
  std::set<std::int64_t> committed;
  // Version 1: the n of every (step, scope), from /vectors, for the thresholds it lacks it in.
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> sizes() const;
};

AnalysisReader::AnalysisReader(const fs::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->file = open_file(path, false);
  load();
}

AnalysisReader::AnalysisReader(const data::FileImage& image) : impl_(std::make_unique<Impl>()) {
  h5::silence();
  impl_->path = image.name;
  impl_->file = checked_analysis(
      h5::checked(data::h5::open_image(image.bytes, image.name), H5Fclose, image.name, "cannot open the file image"),
      image.name);
  load();
}

void AnalysisReader::load() {
  const fs::path& path = impl_->path;
  const hid_t f = impl_->file.get();
  impl_->source = read_source(f, path);
  impl_->options = read_options(f, path);
  impl_->created = h5::read_string_attr(f, "created", path);
  impl_->version = static_cast<int>(h5::read_i64_attr(f, "format_version", path));
  impl_->widths = tables::read_widths(f, path);
  const auto steps = read_step_column(f, tables::kSteps, path);
  impl_->committed = {steps.begin(), steps.end()};
}
AnalysisReader::~AnalysisReader() = default;
AnalysisReader::AnalysisReader(AnalysisReader&&) noexcept = default;
AnalysisReader& AnalysisReader::operator=(AnalysisReader&&) noexcept = default;

const fs::path& AnalysisReader::path() const { return impl_->path; }
const SourceIdentity& AnalysisReader::source() const { return impl_->source; }
const StoredOptions& AnalysisReader::options() const { return impl_->options; }
std::string AnalysisReader::created() const { return impl_->created; }
int AnalysisReader::format_version() const { return impl_->version; }

std::map<std::pair<std::int64_t, std::string>, std::uint64_t> AnalysisReader::Impl::sizes() const {
  std::map<std::pair<std::int64_t, std::string>, std::uint64_t> out;
  for (const auto& v :
       read_table<VectorRow>(file.get(), tables::kVectors, tables::fields<VectorRow>(widths), committed, path, widths))
    out[{v.step, v.scope}] = v.n;
  return out;
}
std::size_t AnalysisReader::scope_width() const { return impl_->widths.scope; }

std::vector<StepRow> AnalysisReader::steps() const {
  return read_table<StepRow>(impl_->file.get(), tables::kSteps, tables::fields<StepRow>(), impl_->committed,
                             impl_->path);
}
std::vector<VectorRow> AnalysisReader::vectors() const {
  const auto& w = impl_->widths;
  return read_table<VectorRow>(impl_->file.get(), tables::kVectors, tables::fields<VectorRow>(w), impl_->committed,
                               impl_->path, w);
}
std::vector<FitRow> AnalysisReader::fits() const {
  const auto& w = impl_->widths;
  return read_table<FitRow>(impl_->file.get(), tables::kFits, tables::fields<FitRow>(w), impl_->committed, impl_->path,
                            w);
}
std::vector<TailRow> AnalysisReader::tails() const {
  const auto& w = impl_->widths;
  return read_table<TailRow>(impl_->file.get(), tables::kTails, tables::fields<TailRow>(w), impl_->committed,
                             impl_->path, w);
}
std::vector<QQRow> AnalysisReader::qq() const {
  const auto& w = impl_->widths;
  return read_table<QQRow>(impl_->file.get(), tables::kQQ, tables::fields<QQRow>(w), impl_->committed, impl_->path, w);
}
std::vector<ThresholdRow> AnalysisReader::thresholds() const {
  const auto& w = impl_->widths;
  auto rows = read_table<ThresholdRow>(impl_->file.get(), tables::kThresholds, tables::fields<ThresholdRow>(w),
                                       impl_->committed, impl_->path, w);
  if (impl_->version < 2) {
    const auto sizes = impl_->sizes();
    for (auto& t : rows) {
      const auto it = sizes.find({t.step, t.scope});
      t.n = it == sizes.end() ? 0 : it->second;
      t.too_small = it != sizes.end() && too_small_for_quality(t.n, t.density);
    }
  }
  return rows;
}

const std::vector<std::string>& AnalysisReader::table_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{tables::kSteps};
    n.insert(n.end(), std::begin(tables::kAll), std::end(tables::kAll));
    return n;
  }();
  return names;
}

std::vector<Attribute> AnalysisReader::attributes() const {
  std::vector<Attribute> out;
  for (auto& [name, value] : h5::read_all_attrs(impl_->file.get(), impl_->path))
    out.push_back({std::move(name), std::move(value)});
  return out;
}

std::vector<Column> AnalysisReader::table(const std::string& name) const {
  const auto fields = tables::fields_of(name, impl_->widths);
  std::uint64_t rows = 0;
  const auto bytes = h5::read_rows(impl_->file.get(), name.c_str(), fields, &rows, impl_->path);
  auto columns = columns_of(bytes, rows, fields, impl_->committed);
  if (impl_->version < 2 && name == tables::kThresholds) {  // n and too_small as thresholds() fills them
    const auto filled = thresholds();
    for (auto& c : columns) {
      if (c.name == "n") {
        auto& n = std::get<std::vector<std::uint64_t>>(c.values);
        for (std::size_t i = 0; i < n.size(); ++i) n[i] = filled[i].n;
      } else if (c.name == "too_small") {
        auto& flag = std::get<std::vector<std::uint8_t>>(c.values);
        for (std::size_t i = 0; i < flag.size(); ++i) flag[i] = filled[i].too_small;
      }
    }
  }
  return columns;
}

}  // namespace gs::analyzer
