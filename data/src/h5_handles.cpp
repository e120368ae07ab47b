#include "gs/data/h5_handles.hpp"

#include <cstring>

namespace gs::data::h5 {

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
herr_t collect_error(unsigned /*n*/, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (!out->empty()) *out += "; ";
  *out += err->func_name != nullptr ? err->func_name : "?";
  *out += ": ";
  *out += err->desc != nullptr ? err->desc : "(no description)";
  return 0;
}
}  // namespace

std::string error_stack_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &text);
  return text.empty() ? std::string("no HDF5 error recorded") : text;
}

void fail(const std::filesystem::path& file, const std::string& what) {
  const std::string stack = error_stack_text();
  H5Eclear2(H5E_DEFAULT);
  // HDF5 locks a file it opens (flock): another process that has it open for writing, or a
  // writer that has it open while this one writes, makes the lock fail. Say so in one line.
  if (stack.find("unable to lock file") != std::string::npos)
    throw gs::Error(file.string() + ": " + what + ": another process has the file open (HDF5 locks it), most " +
                    "likely another gradscope analyze or capture writing it; wait for that one to finish, " +
                    "or write to another file");
  throw gs::Error(file.string() + ": " + what + " (HDF5: " + stack + ")");
}

hid_t open_image(std::span<const std::byte> bytes, const std::filesystem::path& name) {
  // The smallest HDF5 file (a superblock and a root group) is hundreds of bytes; the signature
  // alone is 8.
  if (bytes.size() < 8)
    throw gs::Error(name.string() + ": " + std::to_string(bytes.size()) + " bytes cannot be an HDF5 file");
  H5Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS), name, "opening the file image");
  check(H5Pset_fapl_core(fapl.get(), 64 * 1024, false), name, "opening the file image");
  // HDF5 copies the image (the default callbacks), so the caller's buffer is only read.
  check(H5Pset_file_image(fapl.get(), const_cast<std::byte*>(bytes.data()), bytes.size()), name,
        "opening the file image");
  return H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
}

H5Handle checked(hid_t id, Closer closer, const std::filesystem::path& file, const std::string& what) {
  if (id < 0) fail(file, what);
  return H5Handle(id, closer);
}

H5Handle step_row_type(const std::filesystem::path& file) {
  H5Handle t = type_handle(H5Tcreate(H5T_COMPOUND, sizeof(StepRow)), file, "creating /steps type");
  check(H5Tinsert(t.get(), "step", HOFFSET(StepRow, step), H5T_NATIVE_INT64), file, "step field");
  check(H5Tinsert(t.get(), "loss", HOFFSET(StepRow, loss), H5T_NATIVE_DOUBLE), file, "loss field");
  check(H5Tinsert(t.get(), "lr", HOFFSET(StepRow, lr), H5T_NATIVE_DOUBLE), file, "lr field");
  return t;
}

H5Handle string_type(const std::filesystem::path& file) {
  H5Handle t = type_handle(H5Tcopy(H5T_C_S1), file, "creating a string type");
  check(H5Tset_size(t.get(), H5T_VARIABLE), file, "creating a string type");
  check(H5Tset_cset(t.get(), H5T_CSET_UTF8), file, "creating a string type");
  return t;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::filesystem::path& file) {
  const std::string what = std::string("writing attribute '") + name + "'";
  H5Handle type = string_type(file);
  H5Handle space = space_handle(H5Screate(H5S_SCALAR), file, what);
  H5Handle attr = attr_handle(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), file, what);
  const char* data = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &data), file, what);
}

void write_int_attr(hid_t obj, const char* name, hid_t mem_type, const void* value, const std::filesystem::path& file) {
  const std::string what = std::string("writing attribute '") + name + "'";
  H5Handle space = space_handle(H5Screate(H5S_SCALAR), file, what);
  H5Handle attr = attr_handle(H5Acreate2(obj, name, mem_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), file, what);
  check(H5Awrite(attr.get(), mem_type, value), file, what);
}

void write_int64_array_attr(hid_t obj, const char* name, const std::vector<std::int64_t>& values,
                            const std::filesystem::path& file) {
  const std::string what = std::string("writing attribute '") + name + "'";
  // A 0-d tensor's shape is an empty 1-d array (h5py reads it as shape (0,)).
  const hsize_t dims[1] = {values.size()};
  H5Handle space = space_handle(H5Screate_simple(1, dims, nullptr), file, what);
  H5Handle attr = attr_handle(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), file, what);
  const std::int64_t dummy = 0;
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.empty() ? &dummy : values.data()), file, what);
}

bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

namespace {
H5Handle open_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where) {
  if (!has_attr(obj, name))
    throw gs::Error(file.string() + ": " + where + " has no attribute '" + name +
                    "': not a gradscope snapshot, or a damaged one");
  return attr_handle(H5Aopen(obj, name, H5P_DEFAULT), file,
                     "opening attribute '" + std::string(name) + "' of " + where);
}

[[noreturn]] void bad_attr(const std::filesystem::path& file, const std::string& where, const char* name,
                           const char* expected) {
  throw gs::Error(file.string() + ": attribute '" + name + "' of " + where + " is not " + expected +
                  ": not a gradscope snapshot, or a damaged one");
}

// Scalar or one-element attribute of integer class.
H5Handle open_int_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where) {
  H5Handle attr = open_attr(obj, name, file, where);
  H5Handle type = type_handle(H5Aget_type(attr.get()), file, "reading attribute type");
  H5Handle space = space_handle(H5Aget_space(attr.get()), file, "reading attribute space");
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1)
    bad_attr(file, where, name, "one integer");
  return attr;
}
}  // namespace

std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where) {
  const std::string what = "reading attribute '" + std::string(name) + "' of " + where;
  H5Handle attr = open_attr(obj, name, file, where);
  H5Handle type = type_handle(H5Aget_type(attr.get()), file, what);
  H5Handle space = space_handle(H5Aget_space(attr.get()), file, what);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1)
    bad_attr(file, where, name, "one string");
  if (H5Tis_variable_str(type.get()) > 0) {
    // HDF5 converts between ASCII and UTF-8 strings only sometimes: read in the stored cset.
    H5Handle mem = string_type(file);
    check(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), file, what);
    char* data = nullptr;
    check(H5Aread(attr.get(), mem.get(), &data), file, what);
    std::string value = data != nullptr ? data : "";
    H5free_memory(data);
    return value;
  }
  // Fixed-length strings (as other tools may write them): NUL- or space-padded.
  const size_t size = H5Tget_size(type.get());
  H5Handle mem = type_handle(H5Tcopy(H5T_C_S1), file, what);
  check(H5Tset_size(mem.get(), size + 1), file, what);
  std::string value(size + 1, '\0');
  check(H5Aread(attr.get(), mem.get(), value.data()), file, what);
  value.resize(std::strlen(value.c_str()));
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

std::int64_t read_int_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where) {
  H5Handle attr = open_int_attr(obj, name, file, where);
  std::int64_t value = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), file,
        "reading attribute '" + std::string(name) + "' of " + where);
  return value;
}

std::uint64_t read_uint64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                               const std::string& where) {
  H5Handle attr = open_int_attr(obj, name, file, where);
  std::uint64_t value = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &value), file,
        "reading attribute '" + std::string(name) + "' of " + where);
  return value;
}

std::vector<std::int64_t> read_int64_array_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                                                const std::string& where) {
  const std::string what = "reading attribute '" + std::string(name) + "' of " + where;
  H5Handle attr = open_attr(obj, name, file, where);
  H5Handle type = type_handle(H5Aget_type(attr.get()), file, what);
  H5Handle space = space_handle(H5Aget_space(attr.get()), file, what);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_ndims(space.get()) > 1)
    bad_attr(file, where, name, "a 1-d integer array");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) fail(file, what);
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  if (n > 0) check(H5Aread(attr.get(), H5T_NATIVE_INT64, values.data()), file, what);
  return values;
}

}  // namespace gs::data::h5
