#include "gs/compress/thread_collectives.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gs/base/error.hpp"

namespace gs::compress {
namespace {

// Shared by the workers of one run: a generation barrier with a timeout and an abort flag, and one
// byte slot per worker where each deposits its operand.
class Hub {
 public:
  Hub(int workers, std::chrono::milliseconds timeout)
      : workers_(workers), timeout_(timeout), slots_(std::size_t(workers)), parts_(std::size_t(workers)) {}

  int workers() const { return workers_; }
  std::vector<std::byte>& slot(int rank) { return slots_[std::size_t(rank)]; }
  // An all-to-all's parts of worker `rank`, valid between its two barriers.
  const std::vector<std::vector<std::byte>>*& parts(int rank) { return parts_[std::size_t(rank)]; }

  void arrive_and_wait(const char* what) {
    std::unique_lock lock(mu_);
    if (aborted_) throw Error(std::string("in-process collective '") + what + "': a worker failed");
    const auto gen = generation_;
    if (++arrived_ == workers_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || aborted_; })) {
      aborted_ = true;
      cv_.notify_all();
      throw Error(std::string("in-process collective '") + what + "': timed out waiting for the other workers");
    }
    // The barrier completed even if a worker failed right after leaving it: only an abort that
    // came before everyone arrived is this collective's failure.
    if (generation_ == gen) throw Error(std::string("in-process collective '") + what + "': a worker failed");
  }

  void abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  int workers_;
  std::chrono::milliseconds timeout_;
  std::vector<std::vector<std::byte>> slots_;
  std::vector<const std::vector<std::vector<std::byte>>*> parts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long generation_ = 0;
  bool aborted_ = false;
};

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(Hub& hub, int rank) : hub_(hub), rank_(rank) {}
  int world_size() const override { return hub_.workers(); }
  int rank() const override { return rank_; }

  void allreduce_max(std::span<float> v) override {
    reduce(v, "max", [](float a, float b) { return std::max(a, b); });
  }
  void allreduce_min(std::span<std::int8_t> v) override {
    reduce(v, "min", [](std::int8_t a, std::int8_t b) { return std::min(a, b); });
  }
  void allreduce_sum(std::span<std::int8_t> v) override {
    reduce(v, "sum", [](std::int8_t a, std::int8_t b) { return std::int8_t(a + b); });
  }
  void allreduce_sum(std::span<std::int32_t> v) override {
    reduce(v, "sum", [](std::int32_t a, std::int32_t b) { return a + b; });
  }
  void allreduce_sum(std::span<std::int64_t> v) override {
    reduce(v, "sum", [](std::int64_t a, std::int64_t b) { return a + b; });
  }
  void allreduce_sum(std::span<float> v) override {
    reduce(v, "sum", [](float a, float b) { return a + b; });
  }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    hub_.slot(rank_).assign(mine.begin(), mine.end());
    hub_.arrive_and_wait("allgather");
    std::vector<std::vector<std::byte>> all;
    for (int r = 0; r < hub_.workers(); ++r) all.push_back(hub_.slot(r));
    hub_.arrive_and_wait("allgather");
    return all;
  }

  // Each worker deposits all its parts; each takes its own from every slot.
  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override {
    const int w = hub_.workers();
    if (int(to_each.size()) != w)
      throw Error("in-process all-to-all: " + std::to_string(to_each.size()) + " parts for " + std::to_string(w) +
                  " workers");
    hub_.parts(rank_) = &to_each;
    hub_.arrive_and_wait("alltoall");
    std::vector<std::vector<std::byte>> from;
    for (int r = 0; r < w; ++r) from.push_back((*hub_.parts(r))[std::size_t(rank_)]);
    hub_.arrive_and_wait("alltoall");
    return from;
  }

 private:
  // Every worker deposits its operand, then each reduces all of them in rank order (the same
  // order everywhere, so float sums agree bit for bit across workers).
  template <class T, class Op>
  void reduce(std::span<T> v, const char* what, Op op) {
    auto& mine = hub_.slot(rank_);
    mine.resize(v.size_bytes());
    if (!v.empty()) std::memcpy(mine.data(), v.data(), v.size_bytes());
    hub_.arrive_and_wait(what);
    for (int r = 0; r < hub_.workers(); ++r)
      if (hub_.slot(r).size() != v.size_bytes())
        throw Error(std::string("in-process all-reduce ") + what + ": worker " + std::to_string(r) +
                    " gave a buffer of another size");
    std::vector<T> acc(v.size());
    std::memcpy(acc.data(), hub_.slot(0).data(), v.size_bytes());
    for (int r = 1; r < hub_.workers(); ++r) {
      const T* other = reinterpret_cast<const T*>(hub_.slot(r).data());
      for (std::size_t i = 0; i < v.size(); ++i) acc[i] = op(acc[i], other[i]);
    }
    hub_.arrive_and_wait(what);
    std::copy(acc.begin(), acc.end(), v.begin());
  }

  Hub& hub_;
  int rank_;
};

}  // namespace

void run_workers(int workers, const std::function<void(Collectives&)>& fn, std::chrono::milliseconds timeout) {
  if (workers < 1) throw Error("run_workers: need at least one worker");
  Hub hub(workers, timeout);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r)
    threads.emplace_back([&, r] {
      try {
        ThreadCollectives comm(hub, r);
        fn(comm);
      } catch (...) {
        errors[std::size_t(r)] = std::current_exception();
        hub.abort();
      }
    });
  for (auto& t : threads) t.join();
  // The first failure is the cause; later ones are usually "a worker failed".
  for (auto& e : errors)
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const Error& err) {
        if (std::string(err.what()).find("a worker failed") == std::string::npos) throw;
      }
    }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace gs::compress
