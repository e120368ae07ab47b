#pragma once
// NumPy .npy input (format versions 1.0 to 3.0): little-endian float32 or float64, C or Fortran
// order, any shape; values come back flattened (in file order) as float. Anything else throws
// gs::Error naming the file and what it holds.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gs::data {

struct NpyArray {
  std::string dtype;  // "<f4" or "<f8" as stored
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // flattened
};

NpyArray read_npy(const std::filesystem::path& path);
// Writes a little-endian float32 1-d array (used by tests and examples); refuses to overwrite
// unless force.
void write_npy(const std::filesystem::path& path, const std::vector<float>& values, bool force = false);

}  // namespace gs::data
