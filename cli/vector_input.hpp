#pragma once
// The vector a command reads from a file: a .npy array, or one step of a snapshot (one layer or
// the whole model), chosen as `gradscope analyze` chooses it. Shared by `fit` and `bench kernels`,
// which add the same options to their subcommands.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gs::cli {

struct VectorInput {
  std::string path;
  std::int64_t step = -1;  // -1: the last recorded step
  std::string layer;       // empty: the whole model
  bool whole_model = false;

  // --step, --layer and --whole-model on `sub` (the path is the caller's to add).
  void add_options(CLI::App& sub);
};

struct LoadedVector {
  std::vector<float> values;
  std::string source;  // what was read: "FILE" or "FILE step S layer L" / "... whole model"
};

// gs::Error for a missing file, --layer/--step given for a .npy, both --layer and --whole-model,
// or what the readers refuse.
LoadedVector load_vector(const VectorInput& in);

}  // namespace gs::cli
