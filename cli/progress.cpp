#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace gs::cli {

namespace {
std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::string label, std::int64_t total, bool quiet)
    : label_(std::move(label)), total_(total), quiet_(quiet), tty_(isatty(fileno(stderr)) != 0) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() {
  if (!finished_ && tty_ && !quiet_ && done_ > 0) std::fputc('\n', stderr);
}

void Progress::update(std::int64_t done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  // A terminal is redrawn ten times a second; a pipe gets a line every five seconds.
  const auto every = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000);
  if (now - last_draw_ < every && done != total_) return;
  last_draw_ = now;
  draw(false);
  drawn_done_ = done_;
}

void Progress::finish(const std::string& summary) {
  if (finished_) return;
  finished_ = true;
  if (quiet_) return;
  // A pipe already has the line for the final count; a terminal needs the bar closed.
  if (tty_ || drawn_done_ != done_) draw(true);
  if (!summary.empty()) std::fprintf(stderr, "%s\n", summary.c_str());
}

void Progress::draw(bool final) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? double(done_) / elapsed : 0.0;
  const double eta = rate > 0 ? double(total_ - done_) / rate : -1.0;
  const double frac = total_ > 0 ? double(done_) / double(total_) : 0.0;
  if (tty_) {
    constexpr int width = 28;
    const int filled = static_cast<int>(frac * width + 0.5);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %.1f/s eta %s %s\033[K", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), rate, format_eta(eta).c_str(),
                 extra_.c_str());
    if (final) std::fputc('\n', stderr);
  } else {
    std::fprintf(stderr, "%s: %lld/%lld (%.0f%%) %.1f/s eta %s %s\n", label_.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), 100.0 * frac, rate, format_eta(eta).c_str(), extra_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace gs::cli
