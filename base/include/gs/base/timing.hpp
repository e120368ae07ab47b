#pragma once
// Wall-clock timing of steps and passes: one monotonic clock for the whole project.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <time.h>

namespace gs {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The calling thread's CPU time, in seconds: what a piece of work cost the thread that ran it,
// whatever else shared its core (the DDP hook's thread runs beside backward's).
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
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

// A duration as people write it: "20 s", "1.5 s", "250 ms", "40 µs": three significant digits at
// most (whole seconds from 1000 s on), the unit chosen after rounding, so 0.9996 s is "1 s".
inline std::string human_duration(double seconds) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g", seconds);
  const double r = std::strtod(buf, nullptr), a = std::fabs(r);
  if (a >= 1000.0)
    std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  else if (a >= 1.0 || a == 0.0 || !std::isfinite(a))
    std::snprintf(buf, sizeof buf, "%.3g s", r);
  else if (a >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g ms", r * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g µs", r * 1e6);
  return buf;
}

}  // namespace gs
