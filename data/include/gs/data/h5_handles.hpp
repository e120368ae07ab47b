#pragma once
// gs::data::h5, shared by the HDF5 stores of data/ and analyzer/: owning wrappers around HDF5
// identifiers and the translation of HDF5 failures into gs::Error. The one data header that needs
// <hdf5.h>: gs::data keeps HDF5 private, so a library that includes it links hdf5::hdf5 itself.
// Every identifier lives in an H5Handle so an exception thrown half-way through opening or
// creating a file releases whatever had been opened.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gs/data/codecs.hpp"
#include "gs/base/error.hpp"

namespace gs::data::h5 {

using Closer = herr_t (*)(hid_t);

class H5Handle {
 public:
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~H5Handle() { reset(); }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  // Closes now; returns the closer's status (negative on failure) so close() paths can report it.
  herr_t reset() {
    herr_t status = 0;
    if (id_ >= 0 && closer_ != nullptr) status = closer_(id_);
    id_ = H5I_INVALID_HID;
    return status;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Turns off HDF5's automatic printing of its error stack for the calling thread (the library is
// built thread-safe, where that setting is per thread), so failures reach the user only as gs::Error.
void silence_errors();

// The current HDF5 error stack as one line ("H5Fopen: unable to open file; ..."), innermost last.
std::string error_stack_text();

// Throws gs::Error "<file>: <what>: <HDF5 error text>".
[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what);

// Opens a file image read-only through the core driver; returns the file id (negative when HDF5
// refuses it: the caller says why). gs::Error when the image is too short to be HDF5.
hid_t open_image(std::span<const std::byte> bytes, const std::filesystem::path& name);

// Wraps a returned identifier: throws (with the HDF5 error text) when it is negative.
H5Handle checked(hid_t id, Closer closer, const std::filesystem::path& file, const std::string& what);
inline void check(herr_t status, const std::filesystem::path& file, const std::string& what) {
  if (status < 0) fail(file, what);
}

inline H5Handle file_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Fclose, f, w);
}
inline H5Handle group_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Gclose, f, w);
}
inline H5Handle dataset_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Dclose, f, w);
}
inline H5Handle space_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Sclose, f, w);
}
inline H5Handle type_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Tclose, f, w);
}
inline H5Handle attr_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Aclose, f, w);
}
inline H5Handle plist_handle(hid_t id, const std::filesystem::path& f, const std::string& w) {
  return checked(id, H5Pclose, f, w);
}

// The in-memory (and on-disk) layout of one /steps row.
struct StepRow {
  std::int64_t step;
  double loss;
  double lr;
};
H5Handle step_row_type(const std::filesystem::path& file);
// Sets the filters of `codec` on a dataset creation list (codecs.cpp); gs::Error naming the Debian
// package when libhdf5 cannot load the codec's plugin.
void set_codec_filters(hid_t dcpl, const SnapshotCodec& codec, int deflate_level, const std::filesystem::path& file,
                       const std::string& where);

// Variable-length UTF-8 string type (h5py reads it back as str).
H5Handle string_type(const std::filesystem::path& file);

// Scalar attributes on an object. Readers throw gs::Error naming the attribute when it is absent
// or of the wrong class.
void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::filesystem::path& file);
void write_int_attr(hid_t obj, const char* name, hid_t mem_type, const void* value, const std::filesystem::path& file);
void write_int64_array_attr(hid_t obj, const char* name, const std::vector<std::int64_t>& values,
                            const std::filesystem::path& file);
bool has_attr(hid_t obj, const char* name);
std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where);
std::int64_t read_int_attr(hid_t obj, const char* name, const std::filesystem::path& file, const std::string& where);
std::uint64_t read_uint64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                               const std::string& where);
std::vector<std::int64_t> read_int64_array_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                                                const std::string& where);

}  // namespace gs::data::h5
