// SnapshotWriter: creates the whole v1 layout up front (SWMR forbids creating objects later), then
// appends one row per layer and one /steps row per recorded step, flushing after each step, and
// one /losses row per training step, recorded or not.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <sys/stat.h>

#include "gs/data/snapshot.hpp"
#include "gs/version.hpp"
#include "gs/data/h5_handles.hpp"

namespace gs::data {

std::int64_t LayerInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

namespace {

using h5::H5Handle;

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void validate_layers(const std::filesystem::path& path, const std::vector<LayerInfo>& layers) {
  if (layers.empty()) throw gs::Error(path.string() + ": a snapshot needs at least one layer");
  std::set<std::string> seen;
  for (const auto& layer : layers) {
    if (layer.name.empty() || layer.name == "." || layer.name == ".." || layer.name.find('/') != std::string::npos)
      throw gs::Error(path.string() + ": layer name '" + layer.name +
                      "' is not usable as an HDF5 group name (empty, '.', '..' or holds '/')");
    if (!seen.insert(layer.name).second)
      throw gs::Error(path.string() + ": layer name '" + layer.name + "' appears twice");
    for (std::int64_t d : layer.shape)
      if (d <= 0)
        throw gs::Error(path.string() + ": layer '" + layer.name +
                        "' has a non-positive dimension; only tensors with elements are recorded");
  }
}

// The files SnapshotWriters of this process hold open, by (device, inode): HDF5 cannot replace
// one while it is open, and says so in words of its own.
std::mutex writing_mutex;
std::set<std::pair<dev_t, ino_t>> writing;

std::optional<std::pair<dev_t, ino_t>> file_key(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

bool open_for_writing(const std::filesystem::path& path) {
  const auto key = file_key(path);
  std::lock_guard lock(writing_mutex);
  return key && writing.count(*key);
}

}  // namespace

void check_destination(const std::filesystem::path& path, bool force, const std::string& force_words) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw gs::Error(path.string() + ": is a directory; give a file name inside it, e.g. " + (path / "run.h5").string());
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    throw gs::MissingFile(path.string() + ": the directory " + parent.string() + " does not exist; create it first");
  if (!fs::exists(path, ec)) return;
  if (!force) throw gs::Error(path.string() + ": file exists; refusing to overwrite it (use " + force_words + ")");
  if (open_for_writing(path))
    throw gs::Error(path.string() +
                    ": a recorder of this process still writes it; close that recorder "
                    "first (Python: rec.close(), or record inside `with gradscope.Recorder(...)`)");
  if (open_for_reading(path))
    throw gs::Error(path.string() +
                    ": it is open for reading in this process; close its readers first "
                    "(Python: snap.close(), or read inside `with gradscope.open_snapshot(...) as snap`)");
}

struct SnapshotWriter::Impl {
  std::filesystem::path path;
  std::vector<LayerInfo> layers;
  H5Handle file;
  std::vector<H5Handle> grads, steps_of_layer;
  H5Handle steps, losses;
  H5Handle row_type;
  std::size_t written = 0;
  std::int64_t last_step = 0;
  hsize_t losses_written = 0;
  std::int64_t last_loss_step = 0;
  std::optional<std::pair<dev_t, ino_t>> held;  // this file's entry in `writing`

  void create(const SnapshotMeta& meta, const WriterOptions& options);
  void create_layer(hid_t layers_group, const LayerInfo& layer, const WriterOptions& options);
  H5Handle create_step_table(const char* name);
  // Appends rows of {step, loss, lr} to a table of create_step_table's after its `at` rows.
  void write_step_rows(hid_t table, hsize_t at, std::span<const StepRecord> rows, const std::string& what);
  void write_losses(std::span<const StepRecord> rows);
};

H5Handle SnapshotWriter::Impl::create_step_table(const char* name) {
  const std::string where = std::string("creating /") + name;
  const hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {1024};
  H5Handle space = h5::space_handle(H5Screate_simple(1, dims, maxdims), path, where);
  H5Handle dcpl = h5::plist_handle(H5Pcreate(H5P_DATASET_CREATE), path, where);
  h5::check(H5Pset_chunk(dcpl.get(), 1, chunk), path, where);
  return h5::dataset_handle(
      H5Dcreate2(file.get(), name, row_type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), path, where);
}

void SnapshotWriter::Impl::write_step_rows(hid_t table, hsize_t at, std::span<const StepRecord> rows,
                                           const std::string& what) {
  if (rows.empty()) return;
  std::vector<h5::StepRow> packed;
  for (const auto& r : rows) packed.push_back({r.step, r.loss, r.lr});
  const hsize_t dims[1] = {at + rows.size()}, start[1] = {at}, count[1] = {rows.size()};
  h5::check(H5Dset_extent(table, dims), path, what);
  H5Handle space = h5::space_handle(H5Dget_space(table), path, what);
  h5::check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), path, what);
  H5Handle mem = h5::space_handle(H5Screate_simple(1, count, nullptr), path, what);
  h5::check(H5Dwrite(table, row_type.get(), mem.get(), space.get(), H5P_DEFAULT, packed.data()), path, what);
}

void SnapshotWriter::Impl::write_losses(std::span<const StepRecord> rows) {
  for (const auto& r : rows) {
    if (losses_written > 0 && r.step <= last_loss_step)
      throw gs::Error(path.string() + ": the loss of step " + std::to_string(r.step) + " does not follow step " +
                      std::to_string(last_loss_step) + "; steps must increase");
    last_loss_step = r.step;
  }
  write_step_rows(losses.get(), losses_written, rows, "appending losses to /losses");
  losses_written += rows.size();
}

void SnapshotWriter::Impl::create(const SnapshotMeta& meta, const WriterOptions& options) {
  H5Handle fapl = h5::plist_handle(H5Pcreate(H5P_FILE_ACCESS), path, "creating file access list");
  // SWMR needs the newest file format (version 3 superblock, extensible-array chunk indexes).
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), path,
            "asking for the latest file format");
  // EXCL keeps the no-overwrite promise even if the file appears between our check and here.
  file = h5::file_handle(H5Fcreate(path.c_str(), options.force ? H5F_ACC_TRUNC : H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()),
                         path, "cannot create the snapshot file");

  const hid_t root = file.get();
  h5::write_string_attr(root, "format", kSnapshotFormat, path);
  const std::int32_t version = meta.format_version;
  h5::write_int_attr(root, "format_version", H5T_NATIVE_INT32, &version, path);
  h5::write_string_attr(root, "model", meta.model, path);
  h5::write_string_attr(root, "dataset", meta.dataset, path);
  h5::write_int_attr(root, "seed", H5T_NATIVE_UINT64, &meta.seed, path);
  h5::write_string_attr(root, "created", meta.created.empty() ? utc_now_iso8601() : meta.created, path);
  h5::write_string_attr(root, "gradscope_version",
                        meta.gradscope_version.empty() ? std::string(gs::kVersion) : meta.gradscope_version, path);

  // /layers remembers creation order so readers list layers as the model declared them.
  H5Handle gcpl = h5::plist_handle(H5Pcreate(H5P_GROUP_CREATE), path, "creating /layers");
  h5::check(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED), path,
            "creating /layers");
  H5Handle layers_group =
      h5::group_handle(H5Gcreate2(root, "layers", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), path, "creating /layers");
  for (const auto& layer : layers) create_layer(layers_group.get(), layer, options);

  row_type = h5::step_row_type(path);
  steps = create_step_table("steps");
  losses = create_step_table("losses");

  h5::check(H5Fflush(root, H5F_SCOPE_LOCAL), path, "flushing the new file");
  h5::check(H5Fstart_swmr_write(root), path, "entering SWMR write mode");
  if (const auto key = file_key(path)) {
    std::lock_guard lock(writing_mutex);
    writing.insert(*key);
    held = key;
  }
}

void SnapshotWriter::Impl::create_layer(hid_t layers_group, const LayerInfo& layer, const WriterOptions& options) {
  const std::string where = "creating /layers/" + layer.name;
  H5Handle group = h5::group_handle(H5Gcreate2(layers_group, layer.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                    path, where);

  const auto numel = static_cast<hsize_t>(layer.numel());
  const hsize_t dims[2] = {0, numel}, maxdims[2] = {H5S_UNLIMITED, numel};
  const hsize_t chunk[2] = {1, std::min<hsize_t>(numel, options.max_chunk_elements)};
  H5Handle space = h5::space_handle(H5Screate_simple(2, dims, maxdims), path, where);
  H5Handle dcpl = h5::plist_handle(H5Pcreate(H5P_DATASET_CREATE), path, where);
  h5::check(H5Pset_chunk(dcpl.get(), 2, chunk), path, where);
  // Level 0 keeps its old meaning, raw floats, whatever the codec.
  if (options.deflate_level > 0)
    h5::set_codec_filters(dcpl.get(), snapshot_codec(options.compression), options.deflate_level, path, where);
  H5Handle grad = h5::dataset_handle(
      H5Dcreate2(group.get(), "grad", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), path,
      where + "/grad");
  h5::write_int64_array_attr(grad.get(), "shape", layer.shape, path);

  const hsize_t sdims[1] = {0}, smax[1] = {H5S_UNLIMITED}, schunk[1] = {1024};
  H5Handle sspace = h5::space_handle(H5Screate_simple(1, sdims, smax), path, where);
  H5Handle scpl = h5::plist_handle(H5Pcreate(H5P_DATASET_CREATE), path, where);
  h5::check(H5Pset_chunk(scpl.get(), 1, schunk), path, where);
  H5Handle step = h5::dataset_handle(
      H5Dcreate2(group.get(), "step", H5T_STD_I64LE, sspace.get(), H5P_DEFAULT, scpl.get(), H5P_DEFAULT), path,
      where + "/step");
  grads.push_back(std::move(grad));
  steps_of_layer.push_back(std::move(step));
}

SnapshotWriter::SnapshotWriter(const std::filesystem::path& path, SnapshotMeta meta, std::vector<LayerInfo> layers,
                               WriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  h5::silence_errors();
  impl_->path = path;
  if (options.deflate_level < 0 || options.deflate_level > 9)
    throw gs::Error(path.string() + ": deflate level " + std::to_string(options.deflate_level) + " is outside 0..9");
  if (options.max_chunk_elements < 1) throw gs::Error(path.string() + ": max_chunk_elements must be at least 1");
  if (meta.format_version != kSnapshotFormatVersion)
    throw gs::Error(path.string() + ": this build writes snapshot format version " +
                    std::to_string(kSnapshotFormatVersion) + " only, not " + std::to_string(meta.format_version));
  snapshot_codec(options.compression);  // an unknown name fails before anything is made
  validate_layers(path, layers);
  check_destination(path, options.force);
  std::error_code ec;
  impl_->layers = std::move(layers);
  try {
    impl_->create(meta, options);
  } catch (...) {
    // Close every handle, then remove the half-made file, but only if we created it.
    const bool made = static_cast<bool>(impl_->file);
    impl_.reset();
    if (made) std::filesystem::remove(path, ec);
    throw;
  }
}

SnapshotWriter::~SnapshotWriter() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() explicitly to see the error.
  }
}
SnapshotWriter::SnapshotWriter(SnapshotWriter&&) noexcept = default;
SnapshotWriter& SnapshotWriter::operator=(SnapshotWriter&&) noexcept = default;

void SnapshotWriter::append(const StepRecord& record, std::span<const std::span<const float>> grads) {
  h5::silence_errors();
  if (!impl_ || !impl_->file)
    throw gs::Error((impl_ ? impl_->path.string() : std::string("snapshot")) + ": append after close");
  Impl& s = *impl_;
  if (grads.size() != s.layers.size())
    throw gs::Error(s.path.string() + ": append got " + std::to_string(grads.size()) + " gradient arrays for " +
                    std::to_string(s.layers.size()) + " layers");
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (static_cast<std::int64_t>(grads[i].size()) != s.layers[i].numel())
      throw gs::Error(s.path.string() + ": layer '" + s.layers[i].name + "' needs " +
                      std::to_string(s.layers[i].numel()) + " floats, append got " + std::to_string(grads[i].size()));
  if (s.written > 0 && record.step <= s.last_step)
    throw gs::Error(s.path.string() + ": step " + std::to_string(record.step) + " does not follow step " +
                    std::to_string(s.last_step) + "; steps must increase");
  if (s.losses_written > 0 && record.step <= s.last_loss_step)
    throw gs::Error(s.path.string() + ": step " + std::to_string(record.step) + " does not follow step " +
                    std::to_string(s.last_loss_step) + " of /losses; steps must increase");

  const auto row = static_cast<hsize_t>(s.written);
  // Layers first, /steps last: a reader counts a step once its /steps row exists.
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const std::string what = "appending step " + std::to_string(record.step) + " to layer '" + s.layers[i].name + "'";
    const auto numel = static_cast<hsize_t>(s.layers[i].numel());
    const hsize_t new_dims[2] = {row + 1, numel};
    h5::check(H5Dset_extent(s.grads[i].get(), new_dims), s.path, what);
    H5Handle fspace = h5::space_handle(H5Dget_space(s.grads[i].get()), s.path, what);
    const hsize_t start[2] = {row, 0}, count[2] = {1, numel};
    h5::check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), s.path, what);
    H5Handle mspace = h5::space_handle(H5Screate_simple(2, count, nullptr), s.path, what);
    h5::check(H5Dwrite(s.grads[i].get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, grads[i].data()),
              s.path, what);

    const hsize_t sdims[1] = {row + 1}, sstart[1] = {row}, one[1] = {1};
    h5::check(H5Dset_extent(s.steps_of_layer[i].get(), sdims), s.path, what);
    H5Handle sspace = h5::space_handle(H5Dget_space(s.steps_of_layer[i].get()), s.path, what);
    h5::check(H5Sselect_hyperslab(sspace.get(), H5S_SELECT_SET, sstart, nullptr, one, nullptr), s.path, what);
    H5Handle smem = h5::space_handle(H5Screate_simple(1, one, nullptr), s.path, what);
    h5::check(
        H5Dwrite(s.steps_of_layer[i].get(), H5T_NATIVE_INT64, smem.get(), sspace.get(), H5P_DEFAULT, &record.step),
        s.path, what);
  }
  s.write_losses({&record, 1});
  s.write_step_rows(s.steps.get(), row, {&record, 1}, "appending step " + std::to_string(record.step) + " to /steps");
  // The step is durable (and visible to SWMR readers) once this returns.
  h5::check(H5Fflush(s.file.get(), H5F_SCOPE_LOCAL), s.path, "flushing step " + std::to_string(record.step));
  ++s.written;
  s.last_step = record.step;
}

void SnapshotWriter::append_losses(std::span<const StepRecord> records) {
  h5::silence_errors();
  if (!impl_ || !impl_->file)
    throw gs::Error((impl_ ? impl_->path.string() : std::string("snapshot")) + ": append_losses after close");
  if (records.empty()) return;
  impl_->write_losses(records);
  h5::check(H5Fflush(impl_->file.get(), H5F_SCOPE_LOCAL), impl_->path, "flushing /losses");
}

std::size_t SnapshotWriter::steps_written() const { return impl_ ? impl_->written : 0; }
const std::vector<LayerInfo>& SnapshotWriter::layers() const { return impl_->layers; }
const std::filesystem::path& SnapshotWriter::path() const { return impl_->path; }

void SnapshotWriter::close() {
  if (!impl_ || !impl_->file) return;
  h5::silence_errors();
  Impl& s = *impl_;
  s.grads.clear();
  s.steps_of_layer.clear();
  s.steps.reset();
  s.losses.reset();
  s.row_type.reset();
  if (s.held) {
    std::lock_guard lock(writing_mutex);
    writing.erase(*s.held);
    s.held.reset();
  }
  if (s.file.reset() < 0) h5::fail(s.path, "closing the snapshot file");
}

}  // namespace gs::data
