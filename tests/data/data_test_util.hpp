#pragma once
// Shared by the data/ suites: a scratch directory per test, deterministic gradient values and
// a matcher for gs::Error messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"
#include "synthetic_grads.hpp"
#include "gs/base/error.hpp"

namespace gs::data::test {

// A fresh directory removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "gs_data_";
    if (info != nullptr) name.append(info->test_suite_name()).append("_").append(info->name());
    name.append("_").append(std::to_string(::getpid())).append("_").append(std::to_string(counter++));
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Asserts fn throws gs::Error whose message contains every one of parts.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected gs::Error";
  } catch (const gs::Error& e) {
    const std::string msg = e.what();
    for (const auto& part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "message \"" << msg << "\" lacks \"" << part << "\"";
  }
}

}  // namespace gs::data::test
