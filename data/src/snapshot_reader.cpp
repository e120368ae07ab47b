// SnapshotReader: opens a v1 snapshot (live or closed), validates its layout and streams steps.
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "gs/base/join.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/data/h5_handles.hpp"

namespace gs::data {

namespace {

using h5::H5Handle;

[[noreturn]] void bad_layout(const std::filesystem::path& path, const std::string& problem) {
  throw gs::Error(path.string() + ": " + problem);
}

bool link_exists(hid_t loc, const char* name) { return H5Lexists(loc, name, H5P_DEFAULT) > 0; }

herr_t collect_name(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// Rows currently in a dataset (its first dimension).
hsize_t rows_of(hid_t dset, const std::filesystem::path& path, const std::string& what) {
  H5Handle space = h5::space_handle(H5Dget_space(dset), path, what);
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) h5::fail(path, what);
  return dims[0];
}

// Reads rows [first, first + n) of a 1-d dataset converted to mem_type.
void read_rows(hid_t dset, hid_t mem_type, hsize_t first, hsize_t n, void* out, const std::filesystem::path& path,
               const std::string& what) {
  if (n == 0) return;
  H5Handle fspace = h5::space_handle(H5Dget_space(dset), path, what);
  const hsize_t start[1] = {first}, count[1] = {n};
  h5::check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), path, what);
  H5Handle mspace = h5::space_handle(H5Screate_simple(1, count, nullptr), path, what);
  h5::check(H5Dread(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, out), path, what);
}

// What a reader opens and checks in a file: its ids, metadata and layers. HDF5 (1.10.8 here)
// breaks a dataset that is open under two ids of one process as soon as either is refreshed
// (H5Drefresh): every id then reads the first row's chunk for every row. So the readers of one file
// in a process (an open_snapshot in a notebook and the analysis it starts) share one OpenFile,
// found by the file's device and inode, and refresh and read through it under its lock.
struct OpenFile {
  std::mutex mutex;
  H5Handle file;
  bool swmr = false;
  SnapshotMeta meta;
  std::vector<LayerInfo> layers;
  std::vector<H5Handle> grads, layer_steps;
  H5Handle steps_dset, losses_dset, row_type;  // losses_dset: absent in files written before it
  std::int64_t total_numel = 0;

  void open_file(const std::filesystem::path& path);
  void open_image(const FileImage& image, const std::filesystem::path& path);
  void open_rest(const std::filesystem::path& path);
  void read_meta(const std::filesystem::path& path);
  void open_layers(const std::filesystem::path& path);
  void open_steps(const std::filesystem::path& path);
};

// The OpenFile of every snapshot file open for reading in this process, by (device, inode). An
// OpenFile is closed under the registry's lock, so a file is never opened anew while its old ids
// close.
std::recursive_mutex registry_mutex;
std::map<std::pair<dev_t, ino_t>, std::weak_ptr<OpenFile>>& registry() {
  static std::map<std::pair<dev_t, ino_t>, std::weak_ptr<OpenFile>> files;
  return files;
}

std::shared_ptr<OpenFile> open_shared(const std::filesystem::path& path) {
  std::lock_guard lock(registry_mutex);
  std::erase_if(registry(), [](const auto& entry) { return entry.second.expired(); });
  struct stat st {};
  const bool known = ::stat(path.c_str(), &st) == 0;
  const auto key = std::make_pair(st.st_dev, st.st_ino);
  if (known)
    if (auto open = registry()[key].lock()) return open;
  std::shared_ptr<OpenFile> open(new OpenFile, [](OpenFile* f) {
    std::lock_guard closing(registry_mutex);
    delete f;
  });
  open->open_file(path);
  open->open_rest(path);
  if (known) registry()[key] = open;
  return open;
}

}  // namespace

struct SnapshotReader::Impl {
  std::filesystem::path path;
  std::shared_ptr<OpenFile> open;  // its layers and metadata never change
  std::vector<StepRecord> steps;   // this reader's, as of its last refresh

  std::size_t refresh();
  void attach(std::shared_ptr<OpenFile> f) {
    open = std::move(f);
    refresh();
  }
};

void OpenFile::open_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw gs::MissingFile(path.string() + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) bad_layout(path, "not a regular file");
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) bad_layout(path, "not an HDF5 file (no HDF5 signature); expected a gradscope snapshot");
  // SWMR read sees a live writer's appends; a file that was never in SWMR state may refuse it
  // (e.g. one still held open by a plain writer), so fall back to a normal read-only open.
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
  std::string swmr_error;
  if (id < 0) {
    swmr_error = h5::error_stack_text();
    H5Eclear2(H5E_DEFAULT);
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  } else {
    swmr = true;
  }
  if (id < 0) {
    std::string stack = h5::error_stack_text();
    if (swmr_error != stack) stack += "; with SWMR read: " + swmr_error;
    H5Eclear2(H5E_DEFAULT);
    if (stack.find("truncated") != std::string::npos)
      bad_layout(path,
                 "file is truncated (shorter than its HDF5 superblock says); it was cut "
                 "off while copying or writing (HDF5: " +
                     stack + ")");
    if (is_hdf5 < 0) bad_layout(path, "cannot open as HDF5; not an HDF5 file or unreadable (HDF5: " + stack + ")");
    bad_layout(path, "cannot open the HDF5 file (HDF5: " + stack + ")");
  }
  file = H5Handle(id, H5Fclose);
}

void OpenFile::open_image(const FileImage& image, const std::filesystem::path& path) {
  const hid_t id = h5::open_image(image.bytes, path);
  if (id < 0) {
    const std::string stack = h5::error_stack_text();
    H5Eclear2(H5E_DEFAULT);
    bad_layout(path, "cannot open the file image as HDF5 (HDF5: " + stack + ")");
  }
  file = H5Handle(id, H5Fclose);
}

void OpenFile::open_rest(const std::filesystem::path& path) {
  read_meta(path);
  open_layers(path);
  open_steps(path);
}

void OpenFile::read_meta(const std::filesystem::path& path) {
  const hid_t root = file.get();
  if (!h5::has_attr(root, "format"))
    bad_layout(path, "HDF5 file without a 'format' root attribute: not a gradscope snapshot");
  const std::string format = h5::read_string_attr(root, "format", path, "the root group");
  if (format != kSnapshotFormat) bad_layout(path, "format is '" + format + "', not '" + kSnapshotFormat + "'");
  const std::int64_t version = h5::read_int_attr(root, "format_version", path, "the root group");
  if (version != kSnapshotFormatVersion)
    bad_layout(path, "snapshot format version " + std::to_string(version) +
                         " is not supported; this build reads version " + std::to_string(kSnapshotFormatVersion) +
                         " (upgrade gradscope)");
  meta.format_version = static_cast<int>(version);
  meta.model = h5::read_string_attr(root, "model", path, "the root group");
  meta.dataset = h5::read_string_attr(root, "dataset", path, "the root group");
  meta.seed = h5::read_uint64_attr(root, "seed", path, "the root group");
  meta.created = h5::read_string_attr(root, "created", path, "the root group");
  meta.gradscope_version = h5::read_string_attr(root, "gradscope_version", path, "the root group");
}

void OpenFile::open_layers(const std::filesystem::path& path) {
  if (!link_exists(file.get(), "layers")) bad_layout(path, "snapshot has no /layers group");
  H5Handle group = h5::group_handle(H5Gopen2(file.get(), "layers", H5P_DEFAULT), path, "opening /layers");
  // Creation order (the model's order) when the group tracks it, else name order.
  unsigned crt_flags = 0;
  {
    H5Handle gcpl = h5::plist_handle(H5Gget_create_plist(group.get()), path, "reading /layers");
    h5::check(H5Pget_link_creation_order(gcpl.get(), &crt_flags), path, "reading /layers");
  }
  const H5_index_t order = (crt_flags & H5P_CRT_ORDER_TRACKED) != 0 ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  h5::check(H5Literate(group.get(), order, H5_ITER_INC, nullptr, collect_name, &names), path, "listing /layers");
  if (names.empty()) bad_layout(path, "/layers holds no layers");

  for (const auto& name : names) {
    const std::string where = "/layers/" + name;
    H5Handle lg = h5::group_handle(H5Gopen2(group.get(), name.c_str(), H5P_DEFAULT), path, "opening " + where);
    if (!link_exists(lg.get(), "grad")) bad_layout(path, where + " has no 'grad' dataset");
    if (!link_exists(lg.get(), "step")) bad_layout(path, where + " has no 'step' dataset");
    H5Handle grad = h5::dataset_handle(H5Dopen2(lg.get(), "grad", H5P_DEFAULT), path, "opening " + where + "/grad");
    H5Handle step = h5::dataset_handle(H5Dopen2(lg.get(), "step", H5P_DEFAULT), path, "opening " + where + "/step");
    LayerInfo info{name, h5::read_int64_array_attr(grad.get(), "shape", path, where + "/grad")};
    for (std::int64_t d : info.shape)
      if (d <= 0) bad_layout(path, where + "/grad attribute 'shape' holds a non-positive size");

    H5Handle gtype = h5::type_handle(H5Dget_type(grad.get()), path, "reading " + where + "/grad");
    if (H5Tget_class(gtype.get()) != H5T_FLOAT || H5Tget_size(gtype.get()) != 4)
      bad_layout(path, where + "/grad is not float32");
    H5Handle gspace = h5::space_handle(H5Dget_space(grad.get()), path, "reading " + where + "/grad");
    hsize_t gdims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(gspace.get()) != 2) bad_layout(path, where + "/grad is not 2-d [steps x numel]");
    H5Sget_simple_extent_dims(gspace.get(), gdims, nullptr);
    if (static_cast<std::int64_t>(gdims[1]) != info.numel())
      bad_layout(path, "sizes disagree: " + where + "/grad rows hold " + std::to_string(gdims[1]) +
                           " values but its shape attribute gives " + std::to_string(info.numel()));
    H5Handle stype = h5::type_handle(H5Dget_type(step.get()), path, "reading " + where + "/step");
    H5Handle sspace = h5::space_handle(H5Dget_space(step.get()), path, "reading " + where + "/step");
    if (H5Tget_class(stype.get()) != H5T_INTEGER || H5Sget_simple_extent_ndims(sspace.get()) != 1)
      bad_layout(path, where + "/step is not a 1-d integer dataset");

    total_numel += info.numel();
    layers.push_back(std::move(info));
    grads.push_back(std::move(grad));
    layer_steps.push_back(std::move(step));
  }
}

void OpenFile::open_steps(const std::filesystem::path& path) {
  if (!link_exists(file.get(), "steps")) bad_layout(path, "snapshot has no /steps dataset");
  steps_dset = h5::dataset_handle(H5Dopen2(file.get(), "steps", H5P_DEFAULT), path, "opening /steps");
  H5Handle type = h5::type_handle(H5Dget_type(steps_dset.get()), path, "reading /steps");
  H5Handle space = h5::space_handle(H5Dget_space(steps_dset.get()), path, "reading /steps");
  if (H5Tget_class(type.get()) != H5T_COMPOUND || H5Sget_simple_extent_ndims(space.get()) != 1)
    bad_layout(path, "/steps is not a 1-d compound dataset");
  for (const char* field : {"step", "loss", "lr"})
    if (H5Tget_member_index(type.get(), field) < 0)
      bad_layout(path, std::string("/steps has no field '") + field + "'");
  row_type = h5::step_row_type(path);
  if (link_exists(file.get(), "losses"))
    losses_dset = h5::dataset_handle(H5Dopen2(file.get(), "losses", H5P_DEFAULT), path, "opening /losses");
}

std::size_t SnapshotReader::Impl::refresh() {
  h5::silence_errors();
  OpenFile& f = *open;
  const std::vector<LayerInfo>& layers = f.layers;
  const std::vector<H5Handle>& grads = f.grads;
  const std::vector<H5Handle>& layer_steps = f.layer_steps;
  const hid_t steps_dset = f.steps_dset.get();
  std::lock_guard lock(f.mutex);
  if (f.swmr) {
    for (auto& d : grads) h5::check(H5Drefresh(d.get()), path, "refreshing a layer");
    for (auto& d : layer_steps) h5::check(H5Drefresh(d.get()), path, "refreshing a layer");
    h5::check(H5Drefresh(steps_dset), path, "refreshing /steps");
  }
  // A live writer (or a crash) can leave the newest step partly written; it counts only once every
  // dataset has its row. Any larger gap is damage.
  const hsize_t n_steps = rows_of(steps_dset, path, "reading /steps");
  hsize_t lo = n_steps, hi = n_steps;
  std::vector<hsize_t> grad_rows(layers.size()), step_rows(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    grad_rows[i] = rows_of(grads[i].get(), path, "reading a layer");
    step_rows[i] = rows_of(layer_steps[i].get(), path, "reading a layer");
    lo = std::min({lo, grad_rows[i], step_rows[i]});
    hi = std::max({hi, grad_rows[i], step_rows[i]});
  }
  if (hi - lo > 1) {
    std::ostringstream msg;
    msg << "sizes disagree: /steps has " << n_steps << " rows";
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (grad_rows[i] != n_steps || step_rows[i] != n_steps)
        msg << ", /layers/" << layers[i].name << " has " << grad_rows[i] << " grad rows and " << step_rows[i]
            << " step rows";
    bad_layout(path, msg.str() + " (more than one step apart: the file is damaged)");
  }
  const hsize_t old = steps.size();
  if (lo <= old) return steps.size();
  const hsize_t n_new = lo - old;
  std::vector<h5::StepRow> rows(n_new);
  read_rows(steps_dset, f.row_type.get(), old, n_new, rows.data(), path, "reading /steps");
  std::vector<std::int64_t> layer_step(n_new);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    read_rows(layer_steps[i].get(), H5T_NATIVE_INT64, old, n_new, layer_step.data(), path,
              "reading /layers/" + layers[i].name + "/step");
    for (hsize_t r = 0; r < n_new; ++r)
      if (layer_step[r] != rows[r].step)
        bad_layout(path, "/layers/" + layers[i].name + "/step row " + std::to_string(old + r) + " is step " +
                             std::to_string(layer_step[r]) + " but /steps says " + std::to_string(rows[r].step));
  }
  for (const auto& r : rows) steps.push_back({r.step, r.loss, r.lr});
  return steps.size();
}

SnapshotReader::SnapshotReader(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  h5::silence_errors();
  impl_->path = path;
  impl_->attach(open_shared(path));
}

// An image is a file of its own: nothing to share.
SnapshotReader::SnapshotReader(const FileImage& image) : impl_(std::make_unique<Impl>()) {
  h5::silence_errors();
  impl_->path = image.name;
  auto open = std::make_shared<OpenFile>();
  open->open_image(image, image.name);
  open->open_rest(image.name);
  impl_->attach(std::move(open));
}

SnapshotReader::~SnapshotReader() = default;
SnapshotReader::SnapshotReader(SnapshotReader&&) noexcept = default;
SnapshotReader& SnapshotReader::operator=(SnapshotReader&&) noexcept = default;

const SnapshotMeta& SnapshotReader::meta() const { return impl_->open->meta; }
const std::vector<LayerInfo>& SnapshotReader::layers() const { return impl_->open->layers; }
const std::filesystem::path& SnapshotReader::path() const { return impl_->path; }
std::int64_t SnapshotReader::total_numel() const { return impl_->open->total_numel; }
std::size_t SnapshotReader::refresh() { return impl_->refresh(); }
std::size_t SnapshotReader::step_count() const { return impl_->steps.size(); }
const std::vector<StepRecord>& SnapshotReader::steps() const { return impl_->steps; }

std::size_t SnapshotReader::layer_index(const std::string& name) const {
  const auto& layers = impl_->open->layers;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name == name) return i;
  throw gs::Error(impl_->path.string() + ": no layer '" + name +
                  "'; layers are: " + join(layers, ", ", [](const auto& l) { return l.name; }));
}

std::size_t SnapshotReader::step_index(std::int64_t step) const {
  const auto& steps = impl_->steps;
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (steps[i].step == step) return i;
  throw gs::Error(impl_->path.string() + ": step " + std::to_string(step) + " is not recorded; " +
                  describe_steps(steps));
}

std::vector<StepRecord> SnapshotReader::losses() const {
  h5::silence_errors();
  OpenFile& f = *impl_->open;
  if (!f.losses_dset) return impl_->steps;
  std::lock_guard lock(f.mutex);
  if (f.swmr) h5::check(H5Drefresh(f.losses_dset.get()), impl_->path, "refreshing /losses");
  const hsize_t n = rows_of(f.losses_dset.get(), impl_->path, "reading /losses");
  std::vector<h5::StepRow> rows(n);
  read_rows(f.losses_dset.get(), f.row_type.get(), 0, n, rows.data(), impl_->path, "reading /losses");
  // A row a live writer has made room for but not yet written reads as the fill value (step 0):
  // the rows count up to the first step that does not follow.
  std::vector<StepRecord> out;
  for (const auto& r : rows) {
    if (!out.empty() && r.step <= out.back().step) break;
    out.push_back({r.step, r.loss, r.lr});
  }
  return out;
}

std::optional<std::int64_t> even_spacing(const std::vector<StepRecord>& steps) {
  if (steps.size() < 2) return std::nullopt;
  const std::int64_t gap = steps[1].step - steps[0].step;
  for (std::size_t i = 2; i < steps.size(); ++i)
    if (steps[i].step - steps[i - 1].step != gap) return std::nullopt;
  return gap;
}

std::string describe_steps(const std::vector<StepRecord>& steps) {
  if (steps.empty()) return "no steps are recorded";
  const auto every = even_spacing(steps);
  return "recorded steps run from " + std::to_string(steps.front().step) + " to " + std::to_string(steps.back().step) +
         (every ? ", every " + std::to_string(*every) : std::string()) + " (" + std::to_string(steps.size()) +
         (steps.size() == 1 ? " step)" : " steps)");
}

bool open_for_reading(const std::filesystem::path& path) {
  std::lock_guard lock(registry_mutex);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const auto it = registry().find({st.st_dev, st.st_ino});
  return it != registry().end() && !it->second.expired();
}

void SnapshotReader::read(std::size_t step_index, std::size_t layer_index, std::span<float> out) const {
  h5::silence_errors();
  const Impl& s = *impl_;
  if (step_index >= s.steps.size())
    throw gs::Error(s.path.string() + ": step index " + std::to_string(step_index) + " is out of range; " +
                    std::to_string(s.steps.size()) + " steps recorded");
  if (layer_index >= s.open->layers.size())
    throw gs::Error(s.path.string() + ": layer index " + std::to_string(layer_index) + " is out of range; " +
                    std::to_string(s.open->layers.size()) + " layers");
  const auto numel = static_cast<hsize_t>(s.open->layers[layer_index].numel());
  if (out.size() != numel)
    throw gs::Error(s.path.string() + ": reading layer '" + s.open->layers[layer_index].name + "' needs room for " +
                    std::to_string(numel) + " floats, got " + std::to_string(out.size()));
  const std::string what =
      "reading layer '" + s.open->layers[layer_index].name + "' at step " + std::to_string(s.steps[step_index].step);
  const hid_t dset = s.open->grads[layer_index].get();
  std::lock_guard lock(s.open->mutex);  // no refresh of another reader in between
  H5Handle fspace = h5::space_handle(H5Dget_space(dset), s.path, what);
  const hsize_t start[2] = {step_index, 0}, count[2] = {1, numel};
  h5::check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), s.path, what);
  H5Handle mspace = h5::space_handle(H5Screate_simple(2, count, nullptr), s.path, what);
  h5::check(H5Dread(dset, H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, out.data()), s.path, what);
}

std::vector<float> SnapshotReader::read(std::size_t step_index, std::size_t layer_index) const {
  if (layer_index >= impl_->open->layers.size())
    throw gs::Error(impl_->path.string() + ": layer index " + std::to_string(layer_index) + " is out of range; " +
                    std::to_string(impl_->open->layers.size()) + " layers");
  std::vector<float> out(static_cast<std::size_t>(impl_->open->layers[layer_index].numel()));
  read(step_index, layer_index, out);
  return out;
}

std::vector<float> SnapshotReader::read_model(std::size_t step_index) const {
  std::vector<float> out(static_cast<std::size_t>(impl_->open->total_numel));
  std::size_t offset = 0;
  for (std::size_t l = 0; l < impl_->open->layers.size(); ++l) {
    const auto n = static_cast<std::size_t>(impl_->open->layers[l].numel());
    read(step_index, l, std::span<float>(out).subspan(offset, n));
    offset += n;
  }
  return out;
}

void SnapshotReader::for_each_step(
    std::size_t first, std::size_t last,
    const std::function<void(std::size_t, const StepRecord&, std::span<const float>)>& fn) const {
  if (first > last || last > impl_->steps.size())
    throw gs::Error(impl_->path.string() + ": step range [" + std::to_string(first) + ", " + std::to_string(last) +
                    ") is outside the " + std::to_string(impl_->steps.size()) + " recorded steps");
  // One buffer reused for every step: memory stays at one model's worth.
  std::vector<float> flat(static_cast<std::size_t>(impl_->open->total_numel));
  for (std::size_t i = first; i < last; ++i) {
    std::size_t offset = 0;
    for (std::size_t l = 0; l < impl_->open->layers.size(); ++l) {
      const auto n = static_cast<std::size_t>(impl_->open->layers[l].numel());
      read(i, l, std::span<float>(flat).subspan(offset, n));
      offset += n;
    }
    fn(i, impl_->steps[i], flat);
  }
}

StorageInfo storage_info(const SnapshotReader& reader) {
  h5::silence_errors();
  StorageInfo info;
  std::error_code ec;
  info.file_bytes = std::filesystem::file_size(reader.path(), ec);
  if (ec) throw gs::Error(reader.path().string() + ": cannot read the file size: " + ec.message());
  const auto steps = static_cast<std::uint64_t>(reader.step_count());
  for (const auto& layer : reader.layers())
    info.raw_grad_bytes += steps * static_cast<std::uint64_t>(layer.numel()) * sizeof(float);
  info.stored_grad_bytes = reader.stored_grad_bytes();
  return info;
}

std::uint64_t SnapshotReader::stored_grad_bytes() const {
  std::uint64_t total = 0;
  for (const auto& d : impl_->open->grads) total += H5Dget_storage_size(d.get());
  return total;
}

}  // namespace gs::data
