// gradscope merge --out ANALYSIS.h5 SHARD.h5...: the stores of `gradscope analyze --steps` shards
// (run on one machine or many) merged into the store one run over all their steps would write.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "gs/analyzer/store.hpp"

namespace gs::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> shards;
  std::string output;
  bool force = false, json = false, quiet = false;
};

int run_merge(const MergeArgs& a) {
  std::vector<std::filesystem::path> shards(a.shards.begin(), a.shards.end());
  const analyzer::MergeResult r = analyzer::merge_stores(shards, a.output, a.force);
  if (a.json) {
    std::cout << nlohmann::json{{"output", a.output},
                                {"shards", r.shards},
                                {"steps", r.steps},
                                {"selection", r.selection}}
                     .dump(2)
              << '\n';
  } else if (!a.quiet) {
    std::cout << "merged " << r.shards << " shards, " << r.steps << " steps (selection " << r.selection << ") into "
              << a.output << '\n';
  }
  return 0;
}

Runner setup(CLI::App& sub) {
  auto a = std::make_shared<MergeArgs>();
  sub.add_option("shards", a->shards, "Analysis files of gradscope analyze --steps shards")->required();
  sub.add_option("--out,-o", a->output, "Merged analysis file to create")->required();
  sub.add_flag("--force", a->force, "Replace the merged file if it exists");
  sub.add_flag("--json", a->json, "Print what was merged as JSON");
  sub.add_flag("--quiet,-q", a->quiet, "Print nothing");
  return [a] { return run_merge(*a); };
}

GS_COMMAND("merge", "Merge the analysis files of --steps shards into one, as one run writes it", 51, setup);

}  // namespace
}  // namespace gs::cli
