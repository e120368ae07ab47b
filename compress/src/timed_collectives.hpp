#pragma once
// TimedCollectives: Collectives that pass every call through and add up the time spent inside
// them (ModelCompressor's and BucketCompressor's comm_seconds), in wall time and in the calling
// thread's CPU time.
#include <algorithm>
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
  // What this worker's link sends for the calls, as scripts/exchange_model.py models the
  // collectives' algorithms: a ring all-reduce sends 2 (W-1)/W of the vector, a ring all-gather
  // W-1 times the longest contribution (Gloo gathers equal sizes), an all-to-all what goes to the
  // others. Headers (Ethernet, IP, TCP) and acknowledgements are left out; so are the device
  // collectives passed to timed().
  double link_bytes = 0.0;
  int world_size() const override { return inner_.world_size(); }
  int rank() const override { return inner_.rank(); }
  void allreduce_max(std::span<float> v) override {
    reduce(v, [&] { inner_.allreduce_max(v); });
  }
  void allreduce_min(std::span<std::int8_t> v) override {
    reduce(v, [&] { inner_.allreduce_min(v); });
  }
  void allreduce_sum(std::span<std::int8_t> v) override {
    reduce(v, [&] { inner_.allreduce_sum(v); });
  }
  void allreduce_sum(std::span<std::int32_t> v) override {
    reduce(v, [&] { inner_.allreduce_sum(v); });
  }
  void allreduce_sum(std::span<std::int64_t> v) override {
    reduce(v, [&] { inner_.allreduce_sum(v); });
  }
  void allreduce_sum(std::span<float> v) override {
    reduce(v, [&] { inner_.allreduce_sum(v); });
  }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    std::vector<std::vector<std::byte>> r;
    timed([&] { r = inner_.allgather(mine); });
    std::size_t longest = 0;
    for (const auto& b : r) longest = std::max(longest, b.size());
    link_bytes += double(world_size() - 1) * double(longest);
    return r;
  }
  std::vector<std::vector<std::byte>> allgather_known(std::span<const std::byte> mine,
                                                      std::span<const std::uint64_t> sizes) override {
    std::vector<std::vector<std::byte>> r;
    timed([&] { r = inner_.allgather_known(mine, sizes); });
    std::size_t longest = 0;
    for (const auto& b : r) longest = std::max(longest, b.size());
    link_bytes += double(world_size() - 1) * double(longest);
    return r;
  }
  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override {
    std::vector<std::vector<std::byte>> r;
    timed([&] { r = inner_.alltoall(to_each); });
    for (std::size_t j = 0; j < to_each.size(); ++j)
      if (int(j) != rank()) link_bytes += double(to_each[j].size());
    return r;
  }

  // What a ring all-reduce of `bytes` sends from each of w workers: 2 (W-1)/W of them.
  static double allreduce_link_bytes(int w, double bytes) { return 2.0 * double(w - 1) / double(w) * bytes; }

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
  // A ring all-reduce of v: 2 (W-1)/W of its bytes leave this worker.
  template <class T, class F>
  void reduce(std::span<T> v, F f) {
    timed(f);
    link_bytes += allreduce_link_bytes(world_size(), double(v.size_bytes()));
  }

  Collectives& inner_;
};

}  // namespace gs::compress
