#pragma once
// TimedCollectives: Collectives that pass every call through and add up the time spent inside
// them (ModelCompressor's and BucketCompressor's comm_seconds), in wall time and in the calling
// thread's CPU time.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gs/base/timing.hpp"
#include "gs/compress/collectives.hpp"

namespace gs::compress {

class TimedCollectives final : public Collectives {
 public:
  explicit TimedCollectives(Collectives& inner) : inner_(inner) {}
  double seconds = 0.0;
  double cpu_seconds = 0.0;
  int world_size() const override { return inner_.world_size(); }
  int rank() const override { return inner_.rank(); }
  void allreduce_max(std::span<float> v) override { timed([&] { inner_.allreduce_max(v); }); }
  void allreduce_min(std::span<std::int8_t> v) override { timed([&] { inner_.allreduce_min(v); }); }
  void allreduce_sum(std::span<std::int8_t> v) override { timed([&] { inner_.allreduce_sum(v); }); }
  void allreduce_sum(std::span<std::int32_t> v) override { timed([&] { inner_.allreduce_sum(v); }); }
  void allreduce_sum(std::span<std::int64_t> v) override { timed([&] { inner_.allreduce_sum(v); }); }
  void allreduce_sum(std::span<float> v) override { timed([&] { inner_.allreduce_sum(v); }); }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    std::vector<std::vector<std::byte>> r;
    timed([&] { r = inner_.allgather(mine); });
    return r;
  }
  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override {
    std::vector<std::vector<std::byte>> r;
    timed([&] { r = inner_.alltoall(to_each); });
    return r;
  }

  // Any other communication to count with these (the device collectives).
  template <class F>
  void timed(F f) {
    const auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    f();
    seconds += seconds_since(t0);
    cpu_seconds += thread_cpu_seconds() - cpu0;
  }

 private:
  Collectives& inner_;
};


}  // namespace gs::compress
