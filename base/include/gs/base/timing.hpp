#pragma once
// Wall-clock timing of steps and passes: one monotonic clock for the whole project.
#include <chrono>

namespace gs {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds since construction (or the last restart()).
class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  double seconds() const { return seconds_since(start_); }
  double milliseconds() const { return 1e3 * seconds(); }

 private:
  Clock::time_point start_;
};

}  // namespace gs
