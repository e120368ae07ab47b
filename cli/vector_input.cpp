#include "vector_input.hpp"

#include <filesystem>
#include <optional>

#include "gs/analyzer/vectors.hpp"
#include "gs/data/npy.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"

namespace gs::cli {

void VectorInput::add_options(CLI::App& sub) {
  sub.add_option("--step", step, "training step of a snapshot (default: the last recorded)");
  sub.add_option("--layer", layer, "one layer of a snapshot by name (default: the whole model)");
  sub.add_flag("--whole-model", whole_model, "all layers of the step, concatenated (default)");
}

LoadedVector load_vector(const VectorInput& in) {
  if (in.whole_model && !in.layer.empty()) throw Error("--layer and --whole-model exclude each other: give one");
  const std::filesystem::path path(in.path);
  if (!std::filesystem::exists(path)) throw Error("input file not found: " + in.path);
  if (path.extension() == ".npy") {
    if (!in.layer.empty() || in.step >= 0) throw Error("--layer and --step apply to snapshot files, not to " + in.path);
    return {data::read_npy(path).values, in.path};
  }
  const data::SnapshotReader reader(path);
  const analyzer::VectorChoice choice =
      analyzer::choose_vector(reader, in.step < 0 ? std::nullopt : std::optional<std::int64_t>(in.step),
                              in.layer.empty() ? std::nullopt : std::optional<std::string>(in.layer));
  const std::string what = choice.scope == analyzer::kModelScope ? "whole model" : "layer " + choice.scope;
  return {analyzer::read_vector(reader, choice), in.path + " step " + std::to_string(choice.step) + " " + what};
}

}  // namespace gs::cli
