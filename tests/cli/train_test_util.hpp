#pragma once
// Running the gradscope binary from the training tests: a temporary directory and
// `gradscope train ARGS` (or another command) under a hard time limit, its exit status and output
// captured.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gs::distributed::test {

namespace fs = std::filesystem;

struct ProcResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("gs_dist_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

// Runs `env gradscope COMMAND args` under a hard 120 s limit (so a broken test fails instead of
// hanging).
inline ProcResult gradscope_command(const std::string& command, const std::string& args, const std::string& env = "") {
  TempDir d;
  const std::string cmd = env + " timeout -s KILL 120 " + GS_GRADSCOPE_BIN + " " + command + " " + args + " >" +
                          (d.path() / "out").string() + " 2>" + (d.path() / "err").string();
  const int st = std::system(cmd.c_str());
  ProcResult r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(d.path() / "out");
  r.err = slurp(d.path() / "err");
  return r;
}

// `gradscope train args`.
inline ProcResult gradscope(const std::string& args, const std::string& env = "") {
  return gradscope_command("train", args, env);
}

}  // namespace gs::distributed::test
