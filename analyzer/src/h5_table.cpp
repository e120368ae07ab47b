// HDF5 helpers of the analysis store: attributes and packed compound tables.
#include "h5_table.hpp"

namespace gs::analyzer::h5 {
namespace {

constexpr hsize_t kChunkRows = 4096;

void write_attr(hid_t obj, const char* name, hid_t type, hid_t space, const void* data,
                const std::filesystem::path& file) {
  if (H5Aexists(obj, name) > 0) check(H5Adelete(obj, name), file, std::string("replace attribute ") + name);
  Handle a = checked(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, file,
                     std::string("create attribute ") + name);
  check(H5Awrite(a.get(), type, data), file, std::string("write attribute ") + name);
}
Handle open_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  if (H5Aexists(obj, name) <= 0)
    throw Error(file.string() + ": not a gradscope analysis file (attribute '" + name + "' missing)");
  return checked(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, file, std::string("open attribute ") + name);
}
// An attribute that must hold one value of class `cls` (or, with `array`, any number of them):
// gs::Error naming it otherwise, before anything is read into a buffer sized for one.
Handle open_typed_attr(hid_t obj, const char* name, const std::filesystem::path& file, H5T_class_t cls,
                       const char* expected, bool array = false) {
  Handle a = open_attr(obj, name, file);
  Handle t = checked(H5Aget_type(a.get()), H5Tclose, file, std::string("type of ") + name);
  Handle s = checked(H5Aget_space(a.get()), H5Sclose, file, std::string("space of ") + name);
  if (H5Tget_class(t.get()) != cls || (!array && H5Sget_simple_extent_npoints(s.get()) != 1))
    throw Error(file.string() + ": attribute '" + name + "' is not " + expected +
                ": a damaged gradscope analysis file");
  return a;
}
}  // namespace

void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::filesystem::path& file) {
  Handle t = checked(H5Tcopy(H5T_C_S1), H5Tclose, file, "string type");
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  Handle s = checked(H5Screate(H5S_SCALAR), H5Sclose, file, "scalar space");
  const char* p = value.c_str();
  write_attr(obj, name, t.get(), s.get(), &p, file);
}

void write_i64_attr(hid_t obj, const char* name, std::int64_t v, const std::filesystem::path& file) {
  Handle s = checked(H5Screate(H5S_SCALAR), H5Sclose, file, "scalar space");
  write_attr(obj, name, H5T_STD_I64LE, s.get(), &v, file);
}

void write_u64_attr(hid_t obj, const char* name, std::uint64_t v, const std::filesystem::path& file) {
  Handle s = checked(H5Screate(H5S_SCALAR), H5Sclose, file, "scalar space");
  write_attr(obj, name, H5T_STD_U64LE, s.get(), &v, file);
}

void write_f64_array_attr(hid_t obj, const char* name, const std::vector<double>& values,
                          const std::filesystem::path& file) {
  const hsize_t n = values.size();
  Handle s = checked(H5Screate_simple(1, &n, nullptr), H5Sclose, file, "attribute space");
  write_attr(obj, name, H5T_IEEE_F64LE, s.get(), values.data(), file);
}

bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  Handle a = open_typed_attr(obj, name, file, H5T_STRING, "one string");
  Handle ft = checked(H5Aget_type(a.get()), H5Tclose, file, std::string("type of ") + name);
  if (H5Tis_variable_str(ft.get()) > 0) {
    Handle t = checked(H5Tcopy(H5T_C_S1), H5Tclose, file, "string type");
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_cset(t.get(), H5Tget_cset(ft.get()));
    char* p = nullptr;
    check(H5Aread(a.get(), t.get(), &p), file, std::string("read attribute ") + name);
    std::string s = p ? p : "";
    Handle sp = checked(H5Aget_space(a.get()), H5Sclose, file, "attribute space");
    H5Dvlen_reclaim(t.get(), sp.get(), H5P_DEFAULT, &p);
    return s;
  }
  const std::size_t size = H5Tget_size(ft.get());
  Handle mem = checked(H5Tcopy(H5T_C_S1), H5Tclose, file, "string type");
  H5Tset_size(mem.get(), size + 1);
  std::string s(size + 1, '\0');
  check(H5Aread(a.get(), mem.get(), s.data()), file, std::string("read attribute ") + name);
  return s.substr(0, s.find('\0'));
}

std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  Handle a = open_typed_attr(obj, name, file, H5T_INTEGER, "one integer");
  std::int64_t v = 0;
  check(H5Aread(a.get(), H5T_NATIVE_INT64, &v), file, std::string("read attribute ") + name);
  return v;
}

std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  Handle a = open_typed_attr(obj, name, file, H5T_INTEGER, "one integer");
  std::uint64_t v = 0;
  check(H5Aread(a.get(), H5T_NATIVE_UINT64, &v), file, std::string("read attribute ") + name);
  return v;
}

std::vector<double> read_f64_array_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  Handle a = open_typed_attr(obj, name, file, H5T_FLOAT, "an array of numbers", true);
  Handle s = checked(H5Aget_space(a.get()), H5Sclose, file, "attribute space");
  const auto n = H5Sget_simple_extent_npoints(s.get());
  std::vector<double> v(static_cast<std::size_t>(n < 0 ? 0 : n));
  if (!v.empty()) check(H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()), file, std::string("read ") + name);
  return v;
}

std::vector<std::pair<std::string, AttrValue>> read_all_attrs(hid_t obj, const std::filesystem::path& file) {
  std::vector<std::string> names;
  hsize_t at = 0;
  const auto collect = [](hid_t, const char* name, const H5A_info_t*, void* into) -> herr_t {
    static_cast<std::vector<std::string>*>(into)->emplace_back(name);
    return 0;
  };
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &at, collect, &names), file, "list attributes");
  std::vector<std::pair<std::string, AttrValue>> out;
  for (const std::string& name : names) {
    Handle a = open_attr(obj, name.c_str(), file);
    Handle t = checked(H5Aget_type(a.get()), H5Tclose, file, "type of " + name);
    const H5T_class_t cls = H5Tget_class(t.get());
    if (cls == H5T_STRING)
      out.emplace_back(name, read_string_attr(obj, name.c_str(), file));
    else if (cls == H5T_INTEGER && H5Tget_sign(t.get()) == H5T_SGN_NONE)
      out.emplace_back(name, read_u64_attr(obj, name.c_str(), file));
    else if (cls == H5T_INTEGER)
      out.emplace_back(name, read_i64_attr(obj, name.c_str(), file));
    else if (cls == H5T_FLOAT)
      out.emplace_back(name, read_f64_array_attr(obj, name.c_str(), file));
    else
      throw Error(file.string() + ": attribute '" + name + "' is not a string, an integer or numbers");
  }
  return out;
}

std::size_t field_size(const Field& f) {
  switch (f.type) {
    case FieldType::i64:
    case FieldType::u64:
    case FieldType::f64:
      return 8;
    case FieldType::i32:
      return 4;
    case FieldType::u8:
      return 1;
    case FieldType::str:
      return f.width;
  }
  return 0;
}

std::size_t row_size(const std::vector<Field>& fields) {
  std::size_t n = 0;
  for (const auto& f : fields) n += field_size(f);
  return n;
}

Handle compound_type(const std::vector<Field>& fields, const std::filesystem::path& file) {
  Handle t = checked(H5Tcreate(H5T_COMPOUND, row_size(fields)), H5Tclose, file, "compound type");
  std::size_t offset = 0;
  for (const auto& f : fields) {
    Handle str;
    hid_t member = H5T_NATIVE_DOUBLE;
    switch (f.type) {
      case FieldType::i64:
        member = H5T_NATIVE_INT64;
        break;
      case FieldType::u64:
        member = H5T_NATIVE_UINT64;
        break;
      case FieldType::i32:
        member = H5T_NATIVE_INT32;
        break;
      case FieldType::u8:
        member = H5T_NATIVE_UINT8;
        break;
      case FieldType::f64:
        member = H5T_NATIVE_DOUBLE;
        break;
      case FieldType::str:
        str = checked(H5Tcopy(H5T_C_S1), H5Tclose, file, "string type");
        H5Tset_size(str.get(), f.width);
        H5Tset_strpad(str.get(), H5T_STR_NULLPAD);
        member = str.get();
        break;
    }
    check(H5Tinsert(t.get(), f.name.c_str(), offset, member), file, "compound member " + f.name);
    offset += field_size(f);
  }
  return t;
}

void create_table(hid_t file_id, const char* name, const std::vector<Field>& fields,
                  const std::filesystem::path& file) {
  Handle type = compound_type(fields, file);
  const hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = kChunkRows;
  Handle space = checked(H5Screate_simple(1, &zero, &unlimited), H5Sclose, file, "table space");
  Handle dcpl = checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, file, "dataset properties");
  check(H5Pset_chunk(dcpl.get(), 1, &chunk), file, "chunking");
  check(H5Pset_shuffle(dcpl.get()), file, "shuffle filter");
  check(H5Pset_deflate(dcpl.get(), 4), file, "deflate filter");
  Handle d = checked(H5Dcreate2(file_id, name, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose,
                     file, std::string("create table /") + name);
}

namespace {
Handle open_table(hid_t file_id, const char* name, const std::filesystem::path& file) {
  if (H5Lexists(file_id, name, H5P_DEFAULT) <= 0)
    throw Error(file.string() + ": not a gradscope analysis file (table /" + name + " missing)");
  return checked(H5Dopen2(file_id, name, H5P_DEFAULT), H5Dclose, file, std::string("open /") + name);
}
std::uint64_t rows_of(hid_t d, const std::filesystem::path& file) {
  Handle s = checked(H5Dget_space(d), H5Sclose, file, "table space");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(s.get(), &n, nullptr);
  return n;
}
}  // namespace

std::size_t stored_width(hid_t file_id, const char* table, const char* field, const std::filesystem::path& file) {
  Handle d = open_table(file_id, table, file);
  Handle t = checked(H5Dget_type(d.get()), H5Tclose, file, "table type");
  const int i = H5Tget_member_index(t.get(), field);
  if (i < 0) throw Error(file.string() + ": table /" + table + " has no field '" + field + "'");
  Handle m = checked(H5Tget_member_type(t.get(), static_cast<unsigned>(i)), H5Tclose, file, "member");
  return H5Tget_size(m.get());
}

std::uint64_t table_rows(hid_t file_id, const char* name, const std::filesystem::path& file) {
  Handle d = open_table(file_id, name, file);
  return rows_of(d.get(), file);
}

void append_rows(hid_t file_id, const char* name, const std::vector<Field>& fields, const std::vector<char>& bytes,
                 std::uint64_t rows, const std::filesystem::path& file) {
  if (rows == 0) return;
  Handle d = open_table(file_id, name, file);
  const hsize_t old = rows_of(d.get(), file), count = rows, grown = old + rows;
  check(H5Dset_extent(d.get(), &grown), file, std::string("extend /") + name);
  Handle fs = checked(H5Dget_space(d.get()), H5Sclose, file, "table space");
  check(H5Sselect_hyperslab(fs.get(), H5S_SELECT_SET, &old, nullptr, &count, nullptr), file, "select rows");
  Handle ms = checked(H5Screate_simple(1, &count, nullptr), H5Sclose, file, "memory space");
  Handle type = compound_type(fields, file);
  check(H5Dwrite(d.get(), type.get(), ms.get(), fs.get(), H5P_DEFAULT, bytes.data()), file,
        std::string("write /") + name);
}

std::vector<char> read_rows(hid_t file_id, const char* name, const std::vector<Field>& fields, std::uint64_t* rows,
                            const std::filesystem::path& file) {
  Handle d = open_table(file_id, name, file);
  *rows = rows_of(d.get(), file);
  std::vector<char> bytes(static_cast<std::size_t>(*rows) * row_size(fields));
  if (*rows == 0) return bytes;
  Handle type = compound_type(fields, file);
  check(H5Dread(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), file, std::string("read /") + name);
  return bytes;
}

void truncate_table(hid_t file_id, const char* name, std::uint64_t rows, const std::filesystem::path& file) {
  Handle d = open_table(file_id, name, file);
  const hsize_t n = rows;
  check(H5Dset_extent(d.get(), &n), file, std::string("truncate /") + name);
}

}  // namespace gs::analyzer::h5
