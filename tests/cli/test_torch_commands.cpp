// The torch commands' split (cli/torch_commands.hpp): gradscope does not link libtorch, lists every
// row of the table as gradscope-torch does, hands a torch command's whole command line to
// gradscope-torch next to it, and names the missing file when there is none. The commands' own
// runs through gradscope are test_train.cpp's, test_capture.cpp's and test_checkpoint.cpp's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/run_command.hpp"
#include "torch_commands.hpp"

namespace {

namespace fs = std::filesystem;

using CliRun = gs::testing::CommandRun;

// stdout and stderr together in out.
CliRun run(const std::string& command) { return gs::testing::run_command(command + " 2>&1"); }

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

const fs::path kGradscope = GS_GRADSCOPE_BIN;

// A directory of its own per test, removed at the end.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("gs-torch-commands-" + std::to_string(::getpid()) + "-" +
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
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("libc.so"), std::string::npos) << r.out;  // ldd did list it
  EXPECT_EQ(r.out.find("libtorch"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libc10"), std::string::npos) << r.out;
}

TEST(TorchCommands, GradscopeListsEveryRow) {
  const CliRun r = run(quoted(kGradscope) + " --help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const auto& c : gs::cli::kTorchCommands) EXPECT_TRUE(lists(r.out, c)) << c.name << "\n" << r.out;
  EXPECT_NE(r.out.find("  analyze "), std::string::npos) << r.out;
}

#ifdef GS_GRADSCOPE_TORCH_BIN
const fs::path kGradscopeTorch = GS_GRADSCOPE_TORCH_BIN;

TEST(TorchCommands, GradscopeTorchHasTheSameRowsAndEveryOtherCommand) {
  ASSERT_EQ(kGradscopeTorch.parent_path(), kGradscope.parent_path());
  const CliRun r = run(quoted(kGradscopeTorch) + " --help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const auto& c : gs::cli::kTorchCommands) EXPECT_TRUE(lists(r.out, c)) << c.name << "\n" << r.out;
  const CliRun light = run(quoted(kGradscope) + " --help");
  const std::string subcommands = light.out.substr(light.out.find("Subcommands:"));
  EXPECT_NE(r.out.find(subcommands), std::string::npos) << "gradscope:\n" << light.out << "gradscope-torch:\n" << r.out;
}

TEST(TorchCommands, TheWholeCommandLineReachesGradscopeTorch) {
  // Its --help is the command's own, options gradscope does not know included.
  const CliRun help = run(quoted(kGradscope) + " capture --help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("Usage: " + kGradscope.string() + " capture"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--every"), std::string::npos) << help.out;
  // A bad value fails as it does when gradscope-torch is run directly, with the same message.
  for (const char* args : {" capture --every x", " train --workers 2 --compressor no-such -- x"}) {
    const CliRun via = run(quoted(kGradscope) + args);
    const CliRun direct = run(quoted(kGradscopeTorch) + args);
    EXPECT_NE(via.status, 0) << args;
    EXPECT_EQ(via.status, direct.status) << args;
    EXPECT_EQ(via.out, direct.out) << args;
  }
}

TEST(TorchCommands, AMissingGradscopeTorchIsNamed) {
  Scratch s;
  fs::copy_file(kGradscope, s.dir / "gradscope");
  const CliRun r = run(quoted(s.dir / "gradscope") + " train --steps 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find((s.dir / "gradscope-torch").string() + ", which is missing"), std::string::npos) << r.out;
  // The other commands do not need it.
  const CliRun version = run(quoted(s.dir / "gradscope") + " --version");
  EXPECT_EQ(version.status, 0) << version.out;
}
#else
TEST(TorchCommands, ABuildWithoutLibtorchSaysSo) {
  const CliRun r = run(quoted(kGradscope) + " train --steps 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("'train' needs libtorch, and this build has none"), std::string::npos) << r.out;
}
#endif

}  // namespace
