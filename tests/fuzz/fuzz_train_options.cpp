// `gradscope train`'s option table (gs::distributed::train_options) on any arguments: each flag set from
// its text, then the whole configuration validated. Whatever validates must reach the workers
// unchanged: the arguments the launcher gives a worker parse back to the same shared configuration.
#include <cstdlib>

#include "fuzz_util.hpp"
#include "gs/distributed/config.hpp"
#include "gs/base/error.hpp"

namespace {

// Flag value flag value ... (a switch takes no value), as the CLI reads them.
gs::distributed::TrainConfig parse(const std::vector<std::string>& args) {
  gs::distributed::TrainConfig cfg;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& o = gs::distributed::train_option(args[i]);
    if (o.kind == gs::ValueKind::flag) {
      o.set(cfg, "1");
    } else {
      if (i + 1 >= args.size()) throw gs::Error(args[i] + " needs a value");
      o.set(cfg, args[++i]);
    }
  }
  cfg.validate();
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gs::distributed::TrainConfig cfg;
  try {
    cfg = parse(gs::fuzz::split_args(data, size));
  } catch (const gs::Error&) {
    return 0;
  }
  for (int r = 0; r < std::min(cfg.workers, 3); ++r) {
    gs::distributed::TrainConfig worker;
    try {
      worker = parse(cfg.worker_args(r, 29500));
    } catch (const gs::Error& e) {
      std::fprintf(::stdout, "worker %d refused its arguments: %s\n", r, e.what());
      std::abort();  // the launcher would start a worker that cannot parse what it was given
    }
    if (worker.shared_description() != cfg.shared_description()) std::abort();
  }
  return 0;
}
