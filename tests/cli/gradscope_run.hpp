#pragma once
// The gradscope binary run to its end in a test: exit status, stdout and stderr.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/run_command.hpp"
#include "common/temp_dir.hpp"

namespace gs::testing {

struct CliRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `gradscope COMMAND_AND_ARGS`, with `env` ("NAME=value ...", may be empty) in its environment;
// stderr goes through a file in dir.
inline CliRun run_gradscope(const std::string& command_and_args, const TempDir& dir, const std::string& env = {}) {
  const std::filesystem::path err_file = dir / "stderr.txt";
  // Passive OpenMP waits: on a loaded 2-core machine spinning threads of tiny parallel regions
  // slow these small runs tenfold (the results do not depend on it).
  const std::string cmd = "OMP_WAIT_POLICY=passive " + env + (env.empty() ? "" : " ") + std::string(GS_GRADSCOPE_BIN) +
                          " " + command_and_args + " 2>" + err_file.string();
  const CommandRun run = run_command(cmd);
  CliRun r{run.status, run.out, {}};
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

}  // namespace gs::testing
