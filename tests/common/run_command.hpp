#pragma once
// A shell command run to its end: its exit status and what it wrote to stdout (redirect stderr in
// the command to keep it too).
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace gs::testing {

struct CommandRun {
  int status = -1;  // the exit status; -1 when the command could not start or died of a signal
  std::string out;  // stdout
};

inline CommandRun run_command(const std::string& command) {
  CommandRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) r.out.append(buf, n);
  const int st = ::pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace gs::testing
