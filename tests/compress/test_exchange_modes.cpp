// The DDP hook core's exchange modes (gs/compress/bucket_compressor.hpp): compress-when auto
// (CompressionGate: dense while dense is the faster exchange, the choice the same on every worker,
// a look at the other mode from time to time, resumed to the bit) and the shared exchange (one
// set of indices per bucket, a rotating leader's; the update the same on every worker, the bytes
// flat in the number of workers, resumed to the bit).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

#include "bucket_exchange.hpp"
#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

// Collectives that take `dense_ms` longer for every all-reduce of floats longer than 1000 (a dense
// exchange), `sparse_ms` longer for every all-gather (a sparse one), on the workers listed.
class SlowCollectives final : public Collectives {
 public:
  SlowCollectives(Collectives& inner, int dense_ms, int sparse_ms, std::vector<int> slow_workers = {0, 1, 2, 3})
      : c_(inner), dense_ms_(dense_ms), sparse_ms_(sparse_ms), slow_(std::move(slow_workers)) {}
  int world_size() const override { return c_.world_size(); }
  int rank() const override { return c_.rank(); }
  void allreduce_max(std::span<float> v) override { c_.allreduce_max(v); }
  void allreduce_min(std::span<std::int8_t> v) override { c_.allreduce_min(v); }
  void allreduce_sum(std::span<std::int8_t> v) override { c_.allreduce_sum(v); }
  void allreduce_sum(std::span<std::int32_t> v) override { c_.allreduce_sum(v); }
  void allreduce_sum(std::span<std::int64_t> v) override { c_.allreduce_sum(v); }
  void allreduce_sum(std::span<float> v) override {
    if (v.size() > 1000) wait(dense_ms_);
    c_.allreduce_sum(v);
  }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    wait(sparse_ms_);
    return c_.allgather(mine);
  }

 private:
  void wait(int ms) const {
    if (std::find(slow_.begin(), slow_.end(), rank()) != slow_.end())
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  Collectives& c_;
  int dense_ms_, sparse_ms_;
  std::vector<int> slow_;
};

const BucketParam kParams0[] = {{1, 4000}}, kParams1[] = {{2, 3000}};

// One step of two buckets on one worker: the update.
std::vector<float> step(BucketCompressor& c, Collectives& comm, int s) {
  const auto g0 = gs::testing::grad(4000, 100 * std::uint64_t(s) + std::uint64_t(comm.rank()));
  const auto g1 = gs::testing::grad(3000, 100 * std::uint64_t(s) + 50 + std::uint64_t(comm.rank()));
  std::vector<float> out(7000);
  c.exchange(0, g0, kParams0, comm, std::span<float>(out).first(4000), false);
  c.exchange(1, g1, kParams1, comm, std::span<float>(out).subspan(4000), true);
  return out;
}

std::unique_ptr<BucketCompressor> auto_core(int rank, std::int64_t interval = 4) {
  auto c = gs::testing::make_bucket("sidco-e", 0.01, rank);
  c->set_compress_when(CompressionGate::When::automatic, interval);
  return c;
}

std::vector<bool> dense_flags(const BucketCompressor& c) {
  std::vector<bool> v;
  for (const auto& s : c.history()) v.push_back(s.dense);
  return v;
}

}  // namespace

TEST(CompressionGate, ChoosesTheFasterModeAndLooksAgainSeldomWhenFarSlower) {
  CompressionGate g(CompressionGate::When::automatic, 10);
  // No warm-up: step 0 compressed, step 1 dense, then the choice.
  EXPECT_FALSE(g.dense_at(0));
  g.add(0, false, 0.5);
  EXPECT_FALSE(g.choice_due());
  EXPECT_TRUE(g.dense_at(1));
  g.add(1, true, 0.4);
  ASSERT_TRUE(g.choice_due());
  const float cold[] = {0.4f, 0.5f};  // the maximum over the workers: dense's first step looked faster
  g.choose(2, cold);
  EXPECT_TRUE(g.chose_dense());
  // The first choice, between times within a factor 2, is looked at again at once: step 2 runs it,
  // step 3 the other mode.
  EXPECT_TRUE(g.dense_at(2));
  g.add(2, true, 2.0);
  EXPECT_FALSE(g.choice_due());
  {  // a checkpoint between the second look's two steps resumes to the same look
    gs::StateWriter w;
    g.save_state(w);
    const std::string saved = w.take();
    CompressionGate resumed(CompressionGate::When::automatic, 10);
    gs::StateReader r(saved, "state");
    resumed.load_state(r);
    EXPECT_FALSE(resumed.dense_at(3));
    resumed.add(3, false, 0.5);
    EXPECT_TRUE(resumed.choice_due());
  }
  EXPECT_FALSE(g.dense_at(3));
  g.add(3, false, 0.5);
  ASSERT_TRUE(g.choice_due());
  const float worst[] = {2.2f, 0.5f};  // warm: dense is the slower
  g.choose(4, worst);
  EXPECT_FALSE(g.chose_dense());
  // Dense is 4.4x slower: the next look is ceil(4.4) = 5 intervals on, at step 54.
  for (std::int64_t s = 4; s < 54; ++s) EXPECT_FALSE(g.dense_at(s)) << s;
  EXPECT_TRUE(g.dense_at(54));
  g.add(54, true, 0.1);  // the network got faster
  ASSERT_TRUE(g.choice_due());
  const float now[] = {0.1f, 0.5f};
  g.choose(55, now);
  EXPECT_TRUE(g.chose_dense());
  EXPECT_TRUE(g.dense_at(55));
  EXPECT_FALSE(g.dense_at(55 + 5 * 10));  // a look at compression, 5 intervals on
  // A first choice between times more than a factor 2 apart is not looked at again so soon.
  CompressionGate far(CompressionGate::When::automatic, 10);
  far.add(0, false, 0.5);
  far.add(1, true, 3.0);
  ASSERT_TRUE(far.choice_due());
  const float slow_link[] = {3.0f, 0.5f};
  far.choose(2, slow_link);
  for (std::int64_t s = 2; s < 62; ++s) EXPECT_FALSE(far.dense_at(s)) << s;  // 6 intervals on
  EXPECT_TRUE(far.dense_at(62));
  // Off, the gate never sends dense.
  CompressionGate off;
  off.add(0, false, 1.0);
  EXPECT_FALSE(off.dense_at(1));
  EXPECT_FALSE(off.choice_due());
  EXPECT_NE(error_message([] { CompressionGate::parse("sometimes"); }).find("use always or auto"), std::string::npos);
  EXPECT_NE(error_message([] { CompressionGate(CompressionGate::When::automatic, 0); }).find("at least 1"),
            std::string::npos);
}

TEST(CompressWhenAuto, EveryWorkerChoosesAlikeAndTheFasterModeWins) {
  for (const bool dense_slow : {true, false}) {
    std::vector<std::vector<bool>> flags(3);
    run_workers(3, [&](Collectives& inner) {
      // Dense slow on worker 2 only, or the all-gather slow on worker 0 only: the workers' times
      // differ, their choice does not.
      SlowCollectives comm(inner, dense_slow ? 40 : 0, dense_slow ? 0 : 40, {dense_slow ? 2 : 0});
      auto c = auto_core(comm.rank());
      for (int s = 0; s < 12; ++s) step(*c, comm, s);
      flags[std::size_t(comm.rank())] = dense_flags(*c);
    });
    EXPECT_EQ(flags[0], flags[1]);
    EXPECT_EQ(flags[0], flags[2]);
    // Steps 0 and 1 time both modes; one is far slower, so from step 2 on the faster until the next
    // look.
    EXPECT_FALSE(flags[0][0]);
    EXPECT_TRUE(flags[0][1]);
    const long dense_after = std::count(flags[0].begin() + 2, flags[0].end(), true);
    if (dense_slow)
      EXPECT_LE(dense_after, 1) << "compression is the faster: dense only in a look";
    else
      EXPECT_GE(dense_after, 9) << "dense is the faster: compression only in a look";
  }
}

// Switching modes loses nothing: one worker's updates plus its final residual add up to its
// gradients (a dense step sends the whole accumulator and empties the residual).
TEST(CompressWhenAuto, ErrorFeedbackLosesNothingAcrossTheSwitches) {
  SoloCollectives inner;
  SlowCollectives comm(inner, 0, 15);  // the all-gather slower: dense chosen after a compressed step
  auto c = auto_core(0, 1);
  std::vector<double> sent(7000, 0.0), grads(7000, 0.0);
  for (int s = 0; s < 10; ++s) {
    const auto out = step(*c, comm, s);
    const auto g0 = gs::testing::grad(4000, 100 * std::uint64_t(s)),
               g1 = gs::testing::grad(3000, 100 * std::uint64_t(s) + 50);
    for (std::size_t i = 0; i < 7000; ++i) {
      sent[i] += out[i];
      grads[i] += i < 4000 ? g0[i] : g1[i - 4000];
    }
  }
  // Step 0 compressed (a residual stays), then dense from step 1 on (it sends the residual with
  // the gradient): after a dense step the updates add up to the gradients, to float rounding.
  const auto flags = dense_flags(*c);
  EXPECT_FALSE(flags.front());
  ASSERT_TRUE(flags.back());
  EXPECT_GT(std::count(flags.begin(), flags.end(), true), 2);
  for (std::size_t i = 0; i < 7000; ++i) EXPECT_NEAR(sent[i], grads[i], 1e-6 + 1e-5 * std::fabs(grads[i])) << i;
}

TEST(CompressWhenAuto, ResumesToTheBit) {
  run_workers(2, [&](Collectives& inner) {
    SlowCollectives comm(inner, 30, 0);  // compression clearly faster: the same choice every time
    auto original = auto_core(comm.rank(), 3);
    for (int s = 0; s < 9; ++s) step(*original, comm, s);
    gs::StateWriter w;
    original->save_state(w);
    const std::string saved = w.take();
    std::vector<std::vector<float>> expected;
    for (int s = 9; s < 20; ++s) expected.push_back(step(*original, comm, s));
    auto resumed = auto_core(comm.rank(), 3);
    gs::StateReader r(saved, "state");
    resumed->load_state(r);
    for (int s = 9; s < 20; ++s) ASSERT_EQ(step(*resumed, comm, s), expected[std::size_t(s - 9)]) << s;
    auto tail = dense_flags(*original);
    tail.erase(tail.begin(), tail.begin() + 9);
    EXPECT_EQ(dense_flags(*resumed), tail);
  });
}

TEST(SharedExchange, TheUpdateIsTheSameOnEveryWorkerAtTheLeadersIndices) {
  std::vector<std::vector<float>> outs(3);
  std::vector<std::uint64_t> bytes(3);
  run_workers(3, [&](Collectives& comm) {
    auto c = gs::testing::make_bucket("topk", 0.01, comm.rank());
    c->set_shared_exchange(true);
    for (int s = 0; s < 4; ++s) outs[std::size_t(comm.rank())] = step(*c, comm, s);
    bytes[std::size_t(comm.rank())] = c->history().back().bytes_sent;
  });
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  // Each bucket's update lies at k = 1% of its elements (the leader's top-k), every worker's
  // contribution averaged there.
  EXPECT_EQ(std::count_if(outs[0].begin(), outs[0].begin() + 4000, [](float v) { return v != 0.0f; }), 40);
  EXPECT_EQ(std::count_if(outs[0].begin() + 4000, outs[0].end(), [](float v) { return v != 0.0f; }), 30);
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_EQ(bytes[0], (40 + 30) * 8u + 2 * 24u);  // indices and values, and each bucket's head
}

// What a worker's link sends (StepStats::link_bytes), as the collectives' algorithms are
// modelled: the all-gather (W-1) times the longest payload of each bucket (exactly W-1 times
// gathered_bytes, plus the small agreements of the step), the shared exchange's and the dense
// step's ring all-reduces 2 (W-1)/W of what they reduce, the sparse all-reduce near 2 (W-1)/W 8k
// (scripts/exchange_model.py); the summary's mean per step follows. W = 2, 3 and 4.
TEST(LinkBytes, FollowTheCollectivesAlgorithms) {
  constexpr std::uint64_t k = 40 + 30;  // 1% of the two buckets
  for (const int w : {2, 3, 4}) {
    const double ring = 2.0 * (w - 1) / w;
    for (const auto mode : {ExchangeMode::allgather, ExchangeMode::shared, ExchangeMode::sparse_allreduce}) {
      SCOPED_TRACE(::testing::Message() << w << " workers, " << to_string(mode));
      StepStats last;
      RunSummary summary;
      run_workers(w, [&](Collectives& comm) {
        auto c = gs::testing::make_bucket("topk", 0.01, comm.rank());
        c->set_exchange(mode);
        for (int s = 0; s < 3; ++s) step(*c, comm, s);
        if (comm.rank() == 1) {
          last = c->history().back();
          summary = c->summary();
        }
      });
      const double link = double(last.link_bytes), gathered = double(last.gathered_bytes);
      // The step's other collectives: the regime's agreement, small vectors.
      if (mode == ExchangeMode::allgather) {
        EXPECT_GE(link, (w - 1) * gathered);
        EXPECT_LE(link, (w - 1) * gathered + 256.0);
      } else if (mode == ExchangeMode::shared) {
        EXPECT_GE(link, ring * 8.0 * k);
        EXPECT_LE(link, ring * (8.0 * k + 2 * 24.0) + 256.0);
      } else {
        // about (1 + 3) (W-1)/W k pairs (up to 3k sums kept), within Ok-Topk's 6k (W-1)/W
        EXPECT_GE(link, 0.5 * ring * 8.0 * k);
        EXPECT_LE(link, 3.0 * ring * 8.0 * k + 256.0);
      }
      EXPECT_GT(summary.link_bytes_per_step, 0.0);
    }
    // A dense step (the warm-up's): the ring all-reduce of the whole gradient.
    StepStats dense;
    run_workers(w, [&](Collectives& comm) {
      WarmupSchedule warm;
      warm.steps = 2;
      auto c = gs::testing::make_bucket("topk", 0.01, comm.rank(), warm);
      for (int s = 0; s < 2; ++s) step(*c, comm, s);  // the second: the settings agreed in the first
      if (comm.rank() == 0) dense = c->history().back();
    });
    ASSERT_TRUE(dense.warmup);
    EXPECT_GE(double(dense.link_bytes), ring * 4.0 * 7000 - 1.0);  // rounded to whole bytes
    EXPECT_LE(double(dense.link_bytes), ring * 4.0 * 7000 + 256.0);
  }
}

TEST(SharedExchange, AWorkersBytesStayFlatInTheWorkers) {
  std::vector<std::uint64_t> per_worker;
  for (int workers : {2, 4, 8}) {
    std::uint64_t b = 0;
    run_workers(workers, [&](Collectives& comm) {
      auto c = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
      c->set_shared_exchange(true);
      for (int s = 0; s < 3; ++s) step(*c, comm, s);
      if (comm.rank() == 0) b = c->history().back().gathered_bytes;
    });
    per_worker.push_back(b);
  }
  // The leader's selection sets the count (its data differ by worker count and step): within 50%.
  for (auto b : per_worker) EXPECT_NEAR(double(b), double(per_worker[0]), 0.5 * double(per_worker[0]));
}

TEST(SharedExchange, ResumesToTheBitAndRefusesCompressorsWithoutASparseSelection) {
  run_workers(2, [&](Collectives& comm) {
    auto make = [&] {
      auto c = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
      c->set_shared_exchange(true);
      c->set_momentum_correction(0.9, "momentum");
      return c;
    };
    auto original = make();
    for (int s = 0; s < 7; ++s) step(*original, comm, s);
    gs::StateWriter w;
    original->save_state(w);
    const std::string saved = w.take();
    std::vector<std::vector<float>> expected;
    for (int s = 7; s < 12; ++s) expected.push_back(step(*original, comm, s));
    auto resumed = make();
    gs::StateReader r(saved, "state");
    resumed->load_state(r);
    for (int s = 7; s < 12; ++s) ASSERT_EQ(step(*resumed, comm, s), expected[std::size_t(s - 7)]) << s;
    // A state of the all-gather exchange does not load into the shared one.
    auto allgather = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
    allgather->set_momentum_correction(0.9, "momentum");
    gs::StateReader r2(saved, "state");
    EXPECT_NE(error_message([&] { allgather->load_state(r2); }).find("the exchange"), std::string::npos);
  });
  for (const char* name : {"qsgd-mn", "none"}) {
    auto c = gs::testing::make_bucket(name, 1.0, 0);
    EXPECT_NE(error_message([&] { c->set_shared_exchange(true); }).find("sends no sparse selection"), std::string::npos)
        << name;
  }
}

// BucketCompressor's exchanges are strategies chosen by name (compress/src/bucket_exchange.hpp):
// each name makes its own, the step and the exchange in effect name the one a bucket runs, and an
// unknown name is refused with the names there are.
TEST(BucketExchanges, EachNameMakesItsOwnAndTheStepNamesTheOneABucketRuns) {
  for (std::string_view name : {"dense", "allgather", "own-rounds", "shared", "sparse-allreduce"})
    EXPECT_EQ(detail::make_bucket_exchange(name)->name(), name);
  const std::string why = error_message([] { detail::make_bucket_exchange("ring"); });
  EXPECT_NE(why.find("'ring'"), std::string::npos) << why;
  EXPECT_NE(why.find("own-rounds, shared or sparse-allreduce"), std::string::npos) << why;

  using detail::bucket_exchange_name;
  // An uncompressed step sends the whole accumulator, whatever the exchange.
  for (ExchangeMode mode : {ExchangeMode::allgather, ExchangeMode::shared, ExchangeMode::sparse_allreduce})
    EXPECT_EQ(bucket_exchange_name(true, mode, Exchange::allgather), "dense");
  EXPECT_EQ(bucket_exchange_name(false, ExchangeMode::allgather, Exchange::allgather), "allgather");
  EXPECT_EQ(bucket_exchange_name(false, ExchangeMode::allgather, Exchange::allreduce), "dense");
  EXPECT_EQ(bucket_exchange_name(false, ExchangeMode::allgather, Exchange::collective), "own-rounds");
  EXPECT_EQ(bucket_exchange_name(false, ExchangeMode::shared, Exchange::allgather), "shared");
  EXPECT_EQ(bucket_exchange_name(false, ExchangeMode::sparse_allreduce, Exchange::allgather), "sparse-allreduce");
}
