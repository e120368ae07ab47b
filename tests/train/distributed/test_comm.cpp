// The Gloo communicator as compress::Collectives: three workers as threads of this process, each
// with its own Communicator on loopback. Every reduction type, the variable-size all-gather, and a
// collective compressor's exchange agree with the in-process reference.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "gs/compress/compressor.hpp"
#include "gs/distributed/comm.hpp"
#include "gs/base/error.hpp"

using gs::distributed::CommOptions;
using gs::distributed::Communicator;

namespace {

// Runs fn(comm) on `workers` threads, each joined to one group; rethrows a worker's exception.
void with_group(int workers, const std::function<void(Communicator&)>& fn, int timeout_ms = 20000) {
  const int port = gs::distributed::free_loopback_port();
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r)
    threads.emplace_back([&, r] {
      try {
        CommOptions o;
        o.rank = r;
        o.world_size = workers;
        o.master_port = port;
        o.timeout = std::chrono::milliseconds(timeout_ms);
        Communicator comm(o);
        fn(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

TEST(Communicator, ReductionsOfEveryTypeAndVariableAllGather) {
  const int workers = 3;
  with_group(workers, [&](Communicator& comm) {
    const int r = comm.rank();
    gs::compress::Collectives& c = comm;  // used through the interface, as compressors do
    std::vector<float> mx = {float(r), -float(r), 0.5f};
    c.allreduce_max(mx);
    EXPECT_EQ(mx, (std::vector<float>{2.0f, 0.0f, 0.5f}));
    std::vector<std::int8_t> mn = {std::int8_t(r), std::int8_t(3 - r), -5};
    c.allreduce_min(mn);
    EXPECT_EQ(mn, (std::vector<std::int8_t>{0, 1, -5}));
    std::vector<std::int8_t> s8 = {std::int8_t(40 * (r + 1) / 3), -42};  // 13+26+40, -126
    c.allreduce_sum(s8);
    EXPECT_EQ(s8, (std::vector<std::int8_t>{79, -126}));
    std::vector<std::int32_t> s32 = {1000000 * (r + 1), -7};
    c.allreduce_sum(s32);
    EXPECT_EQ(s32, (std::vector<std::int32_t>{6000000, -21}));
    std::vector<std::int64_t> s64 = {(std::int64_t(1) << 40) * (r + 1), -7};
    c.allreduce_sum(s64);
    EXPECT_EQ(s64, (std::vector<std::int64_t>{std::int64_t(6) << 40, -21}));
    std::vector<float> sf = {0.25f * float(r)};
    c.allreduce_sum(sf);
    EXPECT_EQ(sf[0], 0.75f);
    c.allreduce_max(std::span<float>());  // empty: no round, no error
    // Sizes 0, 5 and 10 bytes, each worker's bytes distinct.
    std::vector<std::byte> mine(std::size_t(5 * r));
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::byte(16 * r + int(i));
    const auto all = c.allgather(mine);
    ASSERT_EQ(all.size(), 3u);
    for (int w = 0; w < workers; ++w) {
      ASSERT_EQ(all[w].size(), std::size_t(5 * w));
      for (std::size_t i = 0; i < all[w].size(); ++i) EXPECT_EQ(all[w][i], std::byte(16 * w + int(i)));
    }
  });
}

// 3 workers at (6,10) bits agree on levels by 2-bit thermometer sums, then sum 9-bit packed code
// lanes in int64 words: every worker gets the same mean, equal to
// the mean of what each sent (gathered here to check).
TEST(Communicator, CollectiveQuantizerExchangesOverGloo) {
  const int workers = 3;
  const std::size_t n = 2000;
  std::vector<std::vector<float>> means(workers), sents(workers);
  std::vector<std::uint64_t> bytes(workers);
  with_group(workers, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(0.37f * float(i) + float(r)) / float(1 + r);
    auto c = gs::compress::make_compressor("qsgd-mn-ts", 1.0, {.seed = 9 + std::uint64_t(r)});
    sents[r].resize(n);
    means[r].resize(n);
    bytes[r] = c->exchange(g, "w", comm, sents[r], means[r]).wire_bytes;
  });
  for (int w = 0; w < workers; ++w) {
    EXPECT_EQ(means[w], means[0]);
    EXPECT_EQ(bytes[w], 4 + 8 * ((n + 30) / 31) + 8 * ((n + 6) / 7));
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(means[0][i], (sents[0][i] + sents[1][i] + sents[2][i]) / 3.0, 1e-6);
}

TEST(Communicator, AHungPeerEndsACollectiveWithAnError) {
  try {
    with_group(
        2,
        [](Communicator& comm) {
          if (comm.rank() == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3000));
            throw gs::Error("worker 1 gave up");
          }
          std::vector<float> v = {1.0f};
          comm.allreduce_max(v);  // rank 1 never joins: times out after 2 s
        },
        2000);
    FAIL() << "no error";
  } catch (const gs::Error& e) {
    // Rank 0's error comes first: its own timeout, not rank 1's message.
    EXPECT_NE(std::string(e.what()).find("all-reduce max failed"), std::string::npos) << e.what();
  }
}
