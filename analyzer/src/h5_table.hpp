#pragma once
// Internal: owning HDF5 handles, attributes, and extendible 1-d compound tables whose rows are
// packed field by field (no padding), so h5py/pandas read them as plain structured arrays.
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gs/data/h5_handles.hpp"
#include "gs/base/error.hpp"

namespace gs::analyzer::h5 {

// The owning handles and error translation are data/'s, shared by both HDF5 stores.
using data::h5::check;
using data::h5::checked;
using data::h5::Closer;
using data::h5::fail;
using Handle = data::h5::H5Handle;
// Stops HDF5 printing its error stack (this thread): failures reach users as gs::Error.
inline void silence() { data::h5::silence_errors(); }

// Root attributes.
void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::filesystem::path& file);
void write_i64_attr(hid_t obj, const char* name, std::int64_t value, const std::filesystem::path& file);
void write_u64_attr(hid_t obj, const char* name, std::uint64_t value, const std::filesystem::path& file);
void write_f64_array_attr(hid_t obj, const char* name, const std::vector<double>& values,
                          const std::filesystem::path& file);
bool has_attr(hid_t obj, const char* name);
std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file);
std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file);
std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file);
std::vector<double> read_f64_array_attr(hid_t obj, const char* name, const std::filesystem::path& file);
// Every attribute of obj in name order, read by its class: a string, one integer (signed or not)
// or an array of floats. gs::Error naming an attribute of another class.
using AttrValue = std::variant<std::string, std::int64_t, std::uint64_t, std::vector<double>>;
std::vector<std::pair<std::string, AttrValue>> read_all_attrs(hid_t obj, const std::filesystem::path& file);

enum class FieldType { i64, u64, i32, u8, f64, str };
struct Field {
  std::string name;
  FieldType type;
  std::size_t width = 0;  // bytes, for str (fixed length, NUL-padded)
};
std::size_t field_size(const Field& f);
std::size_t row_size(const std::vector<Field>& fields);
// The packed compound type of fields.
Handle compound_type(const std::vector<Field>& fields, const std::filesystem::path& file);

// Row bytes, written and read field by field in the table's field order.
class Packer {
 public:
  explicit Packer(std::vector<char>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const auto at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void str(const std::string& s, std::size_t width) {
    const auto at = out_.size();
    out_.resize(at + width, '\0');
    std::memcpy(out_.data() + at, s.data(), std::min(s.size(), width));  // longer text is cut
  }

 private:
  std::vector<char>& out_;
};

class Unpacker {
 public:
  Unpacker(const char* p) : p_(p) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string str(std::size_t width) {
    std::size_t n = 0;
    while (n < width && p_[n] != '\0') ++n;
    std::string s(p_, n);
    p_ += width;
    return s;
  }

 private:
  const char* p_;
};

// Creates an empty extendible table (chunked, shuffle + deflate).
void create_table(hid_t file_id, const char* name, const std::vector<Field>& fields, const std::filesystem::path& file);
// Width of a string field as stored (0 when the table or field is absent).
std::size_t stored_width(hid_t file_id, const char* table, const char* field, const std::filesystem::path& file);
std::uint64_t table_rows(hid_t file_id, const char* name, const std::filesystem::path& file);
void append_rows(hid_t file_id, const char* name, const std::vector<Field>& fields, const std::vector<char>& bytes,
                 std::uint64_t rows, const std::filesystem::path& file);
// Every row, converted to the given fields (matched by name), packed.
std::vector<char> read_rows(hid_t file_id, const char* name, const std::vector<Field>& fields, std::uint64_t* rows,
                            const std::filesystem::path& file);
void truncate_table(hid_t file_id, const char* name, std::uint64_t rows, const std::filesystem::path& file);

}  // namespace gs::analyzer::h5
