// gradscope's torch commands (torch_commands.hpp), built into gradscope only: each row becomes a
// subcommand that takes any arguments unparsed and replaces this process with gradscope-torch from
// the same directory, given the same command line. gradscope-torch parses and runs the command as
// it always did, and a launched training run's workers start from it (/proc/self/exe).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "app.hpp"
#include "command.hpp"
#include "gs/base/error.hpp"
#include "torch_commands.hpp"

namespace gs::cli {
namespace {

namespace fs = std::filesystem;

fs::path torch_executable() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("could not find gradscope's own path in /proc/self/exe: " + ec.message());
  return self.parent_path() / kTorchExecutable;
}

#ifdef GS_HAVE_TORCH_EXECUTABLE
constexpr bool kBuiltWithTorch = true;
#else
constexpr bool kBuiltWithTorch = false;
#endif

int forward(const std::string& command) {
  if (!kBuiltWithTorch)
    throw Error("'" + command +
                "' needs libtorch, and this build has none: configure with "
                "-DGS_ENABLE_TORCH=ON where libtorch is installed");
  const fs::path exe = torch_executable();
  if (!fs::exists(exe))
    throw Error("'" + command + "' runs in " + exe.string() + ", which is missing: build the target " +
                std::string(kTorchExecutable) + " or install both executables (cmake --install)");
  std::vector<std::string> args = invocation();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(exe.c_str(), argv.data());
  const int err = errno;  // before anything below can change it
  throw Error("could not start " + exe.string() + ": " + std::strerror(err));
}

// One registrar per row, at the row's place in --help. The subcommand has no options and no --help
// of its own: everything after its name, --help included, is gradscope-torch's to read.
struct Forwarders {
  Forwarders() {
    for (const auto& c : kTorchCommands) {
      const std::string name(c.name);
      registry().push_back({name, std::string(c.help), c.order, [name](CLI::App& sub) -> Runner {
                              sub.prefix_command();
                              sub.set_help_flag();
                              return [name] { return forward(name); };
                            }});
    }
  }
};
const Forwarders forwarders;

}  // namespace
}  // namespace gs::cli
