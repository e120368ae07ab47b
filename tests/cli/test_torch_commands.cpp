// The torch commands' split (cli/torch_commands.hpp): gradscope does not link libtorch, lists every
// row of the table as gradscope-torch does, hands a torch command's whole command line to
// gradscope-torch next to it, and names the missing file when there is none. The commands' own
// runs through gradscope are test_train.cpp's, test_capture.cpp's and test_checkpoint.cpp's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "torch_commands.hpp"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& command) {
  CliRun r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

const fs::path kGradscope = GS_GRADSCOPE_BIN;

// A directory of its own per test, removed at the end.
struct Scratch {
  fs::path dir = fs::temp_directory_path() /
                 ("gs-torch-commands-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

// The help line of a command: its name, padding, its help text.
bool lists(const std::string& help, const gs::cli::TorchCommand& c) {
  const std::size_t at = help.find("  " + std::string(c.name) + " ");
  if (at == std::string::npos) return false;
  const std::size_t end = help.find('\n', at);
  return help.substr(at, end - at).find(c.help) != std::string::npos;
}

TEST(TorchCommands, GradscopeDoesNotLinkLibtorch) {
  const CliRun r = run("ldd " + quoted(kGradscope));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("libc.so"), std::string::npos) << r.output;  // ldd did list it
  EXPECT_EQ(r.output.find("libtorch"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("libc10"), std::string::npos) << r.output;
}

TEST(TorchCommands, GradscopeListsEveryRow) {
  const CliRun r = run(quoted(kGradscope) + " --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& c : gs::cli::kTorchCommands) EXPECT_TRUE(lists(r.output, c)) << c.name << "\n" << r.output;
  EXPECT_NE(r.output.find("  analyze "), std::string::npos) << r.output;
}

#ifdef GS_GRADSCOPE_TORCH_BIN
const fs::path kGradscopeTorch = GS_GRADSCOPE_TORCH_BIN;

TEST(TorchCommands, GradscopeTorchHasTheSameRowsAndEveryOtherCommand) {
  ASSERT_EQ(kGradscopeTorch.parent_path(), kGradscope.parent_path());
  const CliRun r = run(quoted(kGradscopeTorch) + " --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& c : gs::cli::kTorchCommands) EXPECT_TRUE(lists(r.output, c)) << c.name << "\n" << r.output;
  const CliRun light = run(quoted(kGradscope) + " --help");
  const std::string subcommands = light.output.substr(light.output.find("Subcommands:"));
  EXPECT_NE(r.output.find(subcommands), std::string::npos) << "gradscope:\n" << light.output << "gradscope-torch:\n"
                                                          << r.output;
}

TEST(TorchCommands, TheWholeCommandLineReachesGradscopeTorch) {
  // Its --help is the command's own, options gradscope does not know included.
  const CliRun help = run(quoted(kGradscope) + " capture --help");
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_NE(help.output.find("Usage: " + kGradscope.string() + " capture"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--every"), std::string::npos) << help.output;
  // A bad value fails as it does when gradscope-torch is run directly, with the same message.
  for (const char* args : {" capture --every x", " train --workers 2 --compressor no-such -- x"}) {
    const CliRun via = run(quoted(kGradscope) + args);
    const CliRun direct = run(quoted(kGradscopeTorch) + args);
    EXPECT_NE(via.status, 0) << args;
    EXPECT_EQ(via.status, direct.status) << args;
    EXPECT_EQ(via.output, direct.output) << args;
  }
}

TEST(TorchCommands, AMissingGradscopeTorchIsNamed) {
  Scratch s;
  fs::copy_file(kGradscope, s.dir / "gradscope");
  const CliRun r = run(quoted(s.dir / "gradscope") + " train --steps 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find((s.dir / "gradscope-torch").string() + ", which is missing"), std::string::npos)
      << r.output;
  // The other commands do not need it.
  const CliRun version = run(quoted(s.dir / "gradscope") + " --version");
  EXPECT_EQ(version.status, 0) << version.output;
}
#else
TEST(TorchCommands, ABuildWithoutLibtorchSaysSo) {
  const CliRun r = run(quoted(kGradscope) + " train --steps 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'train' needs libtorch, and this build has none"), std::string::npos) << r.output;
}
#endif

}  // namespace
