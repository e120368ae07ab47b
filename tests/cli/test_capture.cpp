// `gradscope capture`'s flags come from its option table: a value out of range is one line naming
// the flag, with the range train gives the same flag, and nothing is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "train_test_util.hpp"

namespace {

using namespace gs::distributed::test;

TEST(Capture, OutOfRangeFlagsAreOneLineAndWriteNothing) {
  TempDir d;
  const std::string out = (d.path() / "x.h5").string();
  const std::pair<const char*, const char*> bad[] = {
      {"--batch 0", "--batch must be between 1 and 60000"},
      {"--batch 60001", "--batch must be between 1 and 60000"},
      {"--lr 0", "--lr must be a positive number"},
      {"--momentum 1", "--momentum must be in [0, 1)"},
      {"--steps 0", "--steps must be at least 1"},
      {"--deflate 10", "--deflate must be between 0 and 9"},
      {"--batch 6x", "--batch: '6x' is not an integer"},
      {"--compression zstd", "--compression: zstd not in {none,shuffle,deflate,lz4"},
  };
  for (const auto& [args, want] : bad) {
    const ProcResult r = gradscope_command("capture", std::string(args) + " --model mlp --out " + out);
    EXPECT_NE(r.rc, 0) << args;
    // The first line names the flag; a range is one line, text that is no number gets the
    // parser's hint to --help after it.
    EXPECT_NE(r.err.substr(0, r.err.find('\n')).find(want), std::string::npos) << args << ": " << r.err;
    const bool parse_error = std::string(want).find("is not an integer") != std::string::npos ||
                             std::string(want).find(" not in {") != std::string::npos;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), parse_error ? 2 : 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
    // train refuses the shared flags' values alike.
    const std::string flag = std::string(args).substr(0, std::string(args).find(' '));
    if (flag != "--steps" && flag != "--deflate" && flag != "--compression") {
      const ProcResult t = gradscope(std::string(args) + " --steps 1");
      EXPECT_NE(t.err.find(want), std::string::npos) << args << ": " << t.err;
    }
  }
  // No file named: no file written in the working directory either.
  const ProcResult none = gradscope_command("capture", "--model mlp --steps 1");
  EXPECT_NE(none.rc, 0);
  EXPECT_NE(none.err.find("--out: name the snapshot file to write"), std::string::npos) << none.err;
}

}  // namespace
