// gradscope info FILE.h5 [--json]: what a snapshot holds (also while it is still being written).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "snapshot_text.hpp"
#include "gs/data/snapshot.hpp"

namespace gs::cli {
namespace {

struct InfoConfig {
  std::string file;
  bool json = false;
};

int run_info(const InfoConfig& cfg) {
  data::SnapshotReader reader(cfg.file);
  const auto& meta = reader.meta();
  const auto& steps = reader.steps();
  const auto losses = reader.losses();  // every training step's, recorded or not
  const auto storage = data::storage_info(reader);
  if (cfg.json) {
    const StepSummary ss = summarize_steps(steps);
    const auto min_it =
        std::min_element(losses.begin(), losses.end(), [](const auto& a, const auto& b) { return a.loss < b.loss; });
    const auto ratio = compression_ratio(storage);
    using nlohmann::json;
    json layers = json::array();
    for (const auto& l : reader.layers())
      layers.push_back({{"name", l.name}, {"shape", l.shape}, {"numel", l.numel()}});
    json trajectory = json::array();
    json step_numbers = json::array();
    for (const auto& s : losses) trajectory.push_back(json::array({s.step, s.loss}));
    for (const auto& s : steps) step_numbers.push_back(s.step);
    auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
    json out = {
        {"file", cfg.file},
        {"format", data::kSnapshotFormat},
        {"format_version", meta.format_version},
        {"model", meta.model},
        {"dataset", meta.dataset},
        {"seed", meta.seed},
        {"created", meta.created},
        {"gradscope_version", meta.gradscope_version},
        {"layers", layers},
        {"total_numel", reader.total_numel()},
        {"steps",
         {{"count", steps.size()},
          {"first", opt(ss.first)},
          {"last", opt(ss.last)},
          {"every", opt(ss.every)},
          {"numbers", step_numbers}}},
        {"loss",
         {{"steps", losses.size()},
          {"first", losses.empty() ? json(nullptr) : json(losses.front().loss)},
          {"last", losses.empty() ? json(nullptr) : json(losses.back().loss)},
          {"min", losses.empty() ? json(nullptr) : json(min_it->loss)},
          {"min_step", losses.empty() ? json(nullptr) : json(min_it->step)},
          {"trajectory", trajectory}}},
        {"file_bytes", storage.file_bytes},
        {"raw_grad_bytes", storage.raw_grad_bytes},
        {"stored_grad_bytes", storage.stored_grad_bytes},
        {"compression_ratio", ratio ? json(*ratio) : json(nullptr)},
    };
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  print_snapshot_summary(reader, cfg.file);
  return 0;
}

}  // namespace

GS_COMMAND("info", "Summarize a gradient snapshot file (works while it is being written)", 20,
           [](CLI::App& sub) -> Runner {
             auto cfg = std::make_shared<InfoConfig>();
             sub.add_option("file", cfg->file, "snapshot file (.h5)")->required();
             sub.add_flag("--json", cfg->json, "print JSON on stdout instead of text");
             return [cfg] { return run_info(*cfg); };
           });

}  // namespace gs::cli
