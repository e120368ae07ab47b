#pragma once
// Structure-aware fuzzing of the HDF5 readers: the input is a list of edits that the HDF5 library
// itself applies to a valid file (in memory, the core driver), so the container stays well-formed
// and what varies is what gradscope reads from it: attributes deleted, retyped or given other
// values and shapes, datasets deleted, replaced by others of another type or shape, resized, or
// overwritten with other values.
//
// Raw byte mutation of the container reaches libhdf5's own decoders first; in libhdf5 1.10.8 it
// crashes or hangs in the global heap (variable-length strings) within a few thousand inputs,
// which is the library's to fix (docs/RELIABILITY.md), not something gradscope's code can guard.
#include <hdf5.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_util.hpp"

namespace gs::fuzz {

namespace h5 {

struct Item {
  std::string path;  // object path from the root
  bool dataset = false;
};

inline herr_t visit(hid_t, const char* name, const H5O_info_t* info, void* out) {
  auto& items = *static_cast<std::vector<Item>*>(out);
  if (info->type == H5O_TYPE_GROUP || info->type == H5O_TYPE_DATASET)
    items.push_back({name, info->type == H5O_TYPE_DATASET});
  return 0;
}

inline std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> names;
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0) return names;
  for (hsize_t i = 0; i < info.num_attrs && i < 64; ++i) {
    char name[256] = {};
    if (H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) > 0)
      names.emplace_back(name);
  }
  return names;
}

// A small dataspace from the input: scalar, or rank 1 to 3 with dimensions of at most 9.
inline hid_t space_from(Stream& in, hsize_t& points) {
  const int rank = in.take<std::uint8_t>() % 4;
  if (rank == 0) {
    points = 1;
    return H5Screate(H5S_SCALAR);
  }
  hsize_t dims[3];
  points = 1;
  for (int d = 0; d < rank; ++d) {
    dims[d] = in.take<std::uint8_t>() % 10;
    points *= dims[d];
  }
  return H5Screate_simple(rank, dims, nullptr);
}

// A type from the input, with the bytes of `points` values of it (strings: fixed length).
inline hid_t type_from(Stream& in, hsize_t points, std::vector<std::byte>& values, bool& vlen) {
  static const hid_t numeric[] = {H5T_NATIVE_INT8,   H5T_NATIVE_INT32, H5T_NATIVE_INT64,
                                  H5T_NATIVE_UINT64, H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE};
  const unsigned pick = in.take<std::uint8_t>() % 8;
  vlen = pick == 7;
  hid_t t;
  if (pick < 6) {
    t = H5Tcopy(numeric[pick]);
  } else {
    t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, vlen ? H5T_VARIABLE : 1 + in.take<std::uint8_t>() % 24);
  }
  const std::size_t size = vlen ? 16 : H5Tget_size(t);
  values = in.bytes(points * size);
  values.resize(points * size);
  return t;
}

// Writes an attribute or a dataset's values; vlen strings from the input's bytes as text.
template <class Write>
inline void write_values(hid_t type, bool vlen, std::span<const std::byte> values, hsize_t points, Write write) {
  if (!vlen) {
    write(type, values.data());
    return;
  }
  std::vector<std::string> text(points);
  std::vector<const char*> ptrs(points);
  for (hsize_t i = 0; i < points; ++i) {
    const auto* p = reinterpret_cast<const char*>(values.data() + i * 16);
    text[i].assign(p, strnlen(p, 16));
    ptrs[i] = text[i].c_str();
  }
  write(type, ptrs.data());
}

}  // namespace h5

// base edited by the input's commands (at most 8); the image of the result. Edits HDF5 refuses are
// skipped.
inline std::vector<std::byte> edited_image(std::span<const std::byte> base, Stream& in) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 0);
  std::vector<std::byte> copy(base.begin(), base.end());
  H5Pset_file_image(fapl, copy.data(), copy.size());
  const hid_t file = H5Fopen("fuzz-edit.h5", H5F_ACC_RDWR, fapl);
  H5Pclose(fapl);
  if (file < 0) std::abort();  // the base file is valid
  std::vector<h5::Item> items;
  H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, h5::visit, &items, H5O_INFO_BASIC);

  for (int e = 0; e < 8 && in.left() > 0; ++e) {
    const unsigned op = in.take<std::uint8_t>() % 6;
    const h5::Item& item = items[in.take<std::uint8_t>() % items.size()];
    const hid_t obj = H5Oopen(file, item.path.c_str(), H5P_DEFAULT);
    if (obj < 0) continue;
    const auto attrs = h5::attr_names(obj);
    const std::uint8_t which = in.take<std::uint8_t>();
    if (op <= 1 && !attrs.empty()) {  // an attribute: deleted, or replaced
      const std::string name = attrs[which % attrs.size()];
      H5Adelete(obj, name.c_str());
      if (op == 1) {
        hsize_t points = 0;
        const hid_t space = h5::space_from(in, points);
        std::vector<std::byte> values;
        bool vlen = false;
        const hid_t type = h5::type_from(in, points, values, vlen);
        const hid_t a = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
          h5::write_values(type, vlen, values, points, [&](hid_t t, const void* v) { H5Awrite(a, t, v); });
          H5Aclose(a);
        }
        H5Tclose(type);
        H5Sclose(space);
      }
    } else if (op == 2 && item.path != ".") {  // an object deleted
      H5Ldelete(file, item.path.c_str(), H5P_DEFAULT);
    } else if (op == 3 && item.dataset) {  // a dataset replaced by another of the input's making
      H5Oclose(obj);
      H5Ldelete(file, item.path.c_str(), H5P_DEFAULT);
      hsize_t points = 0;
      const hid_t space = h5::space_from(in, points);
      std::vector<std::byte> values;
      bool vlen = false;
      const hid_t type = h5::type_from(in, points, values, vlen);
      const hid_t d = H5Dcreate2(file, item.path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (d >= 0) {
        h5::write_values(type, vlen, values, points,
                         [&](hid_t t, const void* v) { H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v); });
        H5Dclose(d);
      }
      H5Tclose(type);
      H5Sclose(space);
      continue;
    } else if (op == 4 && item.dataset) {  // a chunked dataset resized
      const hid_t space = H5Dget_space(obj);
      hsize_t dims[8] = {};
      const int rank = H5Sget_simple_extent_ndims(space);
      H5Sclose(space);
      if (rank > 0 && rank <= 8) {
        for (int d = 0; d < rank; ++d) dims[d] = in.take<std::uint8_t>() % 12;
        H5Dset_extent(obj, dims);
      }
    } else if (op == 5 && item.dataset) {  // a dataset's values overwritten in its own type
      const hid_t type = H5Dget_type(obj);
      const hid_t space = H5Dget_space(obj);
      const hssize_t points = H5Sget_simple_extent_npoints(space);
      const std::size_t size = H5Tget_size(type);
      if (H5Tget_class(type) != H5T_STRING && H5Tget_class(type) != H5T_VLEN && points > 0 &&
          std::size_t(points) * size <= (1u << 16)) {
        const hid_t mem = H5Tget_native_type(type, H5T_DIR_DEFAULT);
        std::vector<std::byte> values = in.bytes(std::size_t(points) * size);
        values.resize(std::size_t(points) * H5Tget_size(mem));
        H5Dwrite(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
        H5Tclose(mem);
      }
      H5Sclose(space);
      H5Tclose(type);
    }
    H5Oclose(obj);
  }
  H5Fflush(file, H5F_SCOPE_GLOBAL);
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  std::vector<std::byte> image(size > 0 ? std::size_t(size) : 0);
  if (size > 0) H5Fget_file_image(file, image.data(), image.size());
  H5Fclose(file);
  return image;
}

// base (a file's bytes) edited by the whole input.
inline std::vector<std::byte> edited_image(const std::string& base, const std::uint8_t* data, std::size_t size) {
  Stream edits(data, size);
  return edited_image(std::as_bytes(std::span(base)), edits);
}

}  // namespace gs::fuzz
