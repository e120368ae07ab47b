// `gradscope fit`'s command line (CLI11 and the report options behind it) on any arguments, over a
// small fixed vector: a parse error or gs::Error ends with a message and an exit code, never a
// crash or a hang. The arguments follow `gradscope fit <vector.npy>`.
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "app.hpp"
#include "fuzz_util.hpp"
#include "gs/data/npy.hpp"

namespace {

const std::string& vector_path() {
  static const std::string path = [] {
    std::mt19937_64 rng(5);
    std::exponential_distribution<float> e(1e3f);
    std::vector<float> g(3000);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = (i % 2 ? 1.0f : -1.0f) * e(rng);
    g[7] = 0.0f;
    g[11] = NAN;
    const std::string p = "/tmp/gs-fuzz-fit-" + std::to_string(::getpid()) + ".npy";
    gs::data::write_npy(p, g, true);
    static char to_remove[256];
    std::snprintf(to_remove, sizeof to_remove, "%s", p.c_str());
    std::atexit([] { std::remove(to_remove); });
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)vector_path();
  // Sanitizer reports go to a copy of stderr, which Quiet leaves alone.
  __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<std::intptr_t>(::dup(2))));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"gradscope", "fit", vector_path()};
  for (auto& a : gs::fuzz::split_args(data, size)) args.push_back(std::move(a));
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  const gs::fuzz::Quiet quiet;  // the command's output and its error lines
  gs::cli::run(int(argv.size()), argv.data());
  return 0;
}
