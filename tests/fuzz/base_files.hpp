#pragma once
// The valid files the HDF5 fuzz targets edit: a two-step snapshot and its analysis store, made
// by gradscope's own writers (gs_fuzz_seeds writes the same files as the readers' plain seeds).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gs/analyzer/analyze.hpp"
#include "gs/data/snapshot.hpp"

namespace gs::fuzz {

inline std::vector<float> laplace(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(1e3f);
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = (rng() & 1 ? 1.0f : -1.0f) * e(rng);
  return g;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct BaseFiles {
  std::string snapshot, analysis;  // the files' bytes
};

// Writes both into dir and returns their bytes.
inline BaseFiles make_base_files(const std::filesystem::path& dir) {
  const auto snap = dir / "s.h5", analysis = dir / "s.analysis.h5";
  {
    data::SnapshotMeta meta{"fuzz", "synthetic", 1, "", "", data::kSnapshotFormatVersion};
    data::WriterOptions options;
    options.force = true;
    data::SnapshotWriter w(snap, meta, {{"w", {16, 8}}, {"b", {8}}}, options);
    for (int s = 0; s < 2; ++s) {
      const auto a = laplace(128, 10 + s), b = laplace(8, 20 + s);
      const std::span<const float> grads[2] = {a, b};
      w.append({s, 2.0 - s, 0.1}, grads);
    }
  }
  analyzer::AnalyzeConfig c;
  c.input = snap;
  c.output = analysis;
  c.backend = "cpu";
  c.densities = {0.1};
  c.quiet = true;
  c.force = true;
  analyzer::analyze(c);
  return {slurp(snap), slurp(analysis)};
}

// The same, made once per process in a temporary directory.
inline const BaseFiles& base_files() {
  static const BaseFiles files = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("gs-fuzz-base-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    BaseFiles f = make_base_files(dir);
    std::filesystem::remove_all(dir);
    return f;
  }();
  return files;
}

}  // namespace gs::fuzz
