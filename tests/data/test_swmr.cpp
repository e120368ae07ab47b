// A reader in this process follows a writer in another process (SWMR): it must see the step
// count grow one step at a time and read correct data while the writer is still running. The
// writer waits for an acknowledgement after each step, so what the reader sees is deterministic;
// every wait is bounded.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "data_test_util.hpp"

extern char** environ;

namespace gs::data::test {
namespace {

constexpr std::uint64_t kSeed = 2024;  // as in swmr_writer_helper.cpp
constexpr auto kTimeout = std::chrono::seconds(30);

class Helper {
 public:
  Helper(const std::filesystem::path& file, int steps, const std::string& ack_dir, int crash_after) {
    const std::string steps_s = std::to_string(steps), crash_s = std::to_string(crash_after);
    std::vector<std::string> args{GS_SWMR_HELPER, file.string(), steps_s, ack_dir, crash_s};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, GS_SWMR_HELPER, nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << GS_SWMR_HELPER << ": " << std::strerror(rc);
      pid_ = -1;
    }
  }
  ~Helper() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool running() const { return pid_ > 0; }
  // Exit status, or -1 when it did not end within the timeout.
  int wait() {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// Opens the file as soon as the writer has made it (it is locked while being created).
std::unique_ptr<SnapshotReader> open_when_ready(const std::filesystem::path& path) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) {
      try {
        return std::make_unique<SnapshotReader>(path);
      } catch (const gs::Error& e) {
        last_error = e.what();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "could not open " << path << " within the timeout: " << last_error;
  return nullptr;
}

void expect_step_data(const SnapshotReader& r, std::size_t i) {
  const auto layers = odd_layers();
  ASSERT_EQ(r.steps()[i].step, static_cast<std::int64_t>(10 * i));
  EXPECT_EQ(r.steps()[i].loss, 1.0 / (1 + static_cast<double>(i)));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto want = synthetic_grad(kSeed, static_cast<std::int64_t>(10 * i), l, layers[l].numel());
    const auto got = r.read(i, l);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "step " << i << " layer " << l;
  }
}

TEST(SnapshotSwmr, ReaderFollowsLiveWriterInAnotherProcess) {
  ScratchDir dir;
  const auto path = dir / "live.h5";
  constexpr int kSteps = 6;
  Helper helper(path, kSteps, dir.path().string(), -1);
  ASSERT_TRUE(helper.running());
  auto reader = open_when_ready(path);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->meta().model, "helper");
  EXPECT_LE(reader->step_count(), 1u);
  for (int k = 0; k < kSteps; ++k) {
    // The writer is blocked until we acknowledge step k, so exactly k + 1 steps exist.
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (reader->refresh() < static_cast<std::size_t>(k + 1) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(reader->step_count(), static_cast<std::size_t>(k + 1)) << "waiting for step " << k;
    expect_step_data(*reader, static_cast<std::size_t>(k));
    if (k > 0) expect_step_data(*reader, 0);  // earlier steps stay readable
    // storage_info works mid-write too.
    EXPECT_EQ(storage_info(*reader).raw_grad_bytes, static_cast<std::uint64_t>(k + 1) * reader->total_numel() * 4);
    std::ofstream(dir / ("ack" + std::to_string(k))) << "ok\n";
  }
  EXPECT_EQ(helper.wait(), 0);
  EXPECT_EQ(reader->refresh(), static_cast<std::size_t>(kSteps));
  reader.reset();
  SnapshotReader closed(path);
  EXPECT_EQ(closed.step_count(), static_cast<std::size_t>(kSteps));
  expect_step_data(closed, kSteps - 1);
}

TEST(SnapshotSwmr, CrashedWriterLeavesEarlierStepsReadable) {
  ScratchDir dir;
  const auto path = dir / "crashed.h5";
  Helper helper(path, 10, "-", 4);
  ASSERT_TRUE(helper.running());
  ASSERT_EQ(helper.wait(), 0);
  SnapshotReader r(path);
  ASSERT_EQ(r.step_count(), 4u);
  for (std::size_t i = 0; i < 4; ++i) expect_step_data(r, i);
}

}  // namespace
}  // namespace gs::data::test
