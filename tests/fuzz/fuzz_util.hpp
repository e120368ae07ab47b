#pragma once
// Shared by the fuzz targets: the input as a file (for readers that take a path), as a list of
// command-line arguments, and as a stream of values.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gs::fuzz {

// The bytes as an anonymous in-memory file, named by a /proc/self/fd path.
class MemFile {
 public:
  MemFile(const std::uint8_t* data, std::size_t size) : fd_(memfd_create("gs-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    for (std::size_t done = 0; done < size;) {
      const ssize_t w = ::write(fd_, data + done, size - done);
      if (w <= 0) std::abort();
      done += std::size_t(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// The bytes as arguments: one per line, at most 24 of at most 120 characters.
inline std::vector<std::string> split_args(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (std::size_t i = 0; i < size && args.size() < 24; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else if (cur.size() < 120) {
      cur.push_back(char(data[i]));
    }
  }
  if (!cur.empty() && args.size() < 24) args.push_back(cur);
  return args;
}

// Values taken from the front of the input (zeros once it runs out).
class Stream {
 public:
  Stream(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  template <class T>
  T take() {
    T v{};
    const std::size_t n = std::min<std::size_t>(sizeof(T), std::size_t(end_ - p_));
    if (n > 0) std::memcpy(&v, p_, n);
    p_ += n;
    return v;
  }
  std::vector<std::byte> bytes(std::size_t n) {
    n = std::min<std::size_t>(n, std::size_t(end_ - p_));
    std::vector<std::byte> out(n);
    if (n > 0) std::memcpy(out.data(), p_, n);
    p_ += n;
    return out;
  }
  std::size_t left() const { return std::size_t(end_ - p_); }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// Quiets stdout and stderr (the CLI's printing) while it lives, and gives them back after, so
// that libFuzzer's own report still reaches stderr.
class Quiet {
 public:
  Quiet() {
    std::fflush(stdout);
    std::fflush(stderr);
    out_ = ::dup(1);
    err_ = ::dup(2);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  ~Quiet() {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(out_, 1);
    ::dup2(err_, 2);
    ::close(out_);
    ::close(err_);
  }
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;

 private:
  int out_, err_;
};

}  // namespace gs::fuzz
