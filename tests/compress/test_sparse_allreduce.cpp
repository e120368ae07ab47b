// The sparse all-reduce exchange (BucketCompressor::set_exchange(ExchangeMode::sparse_allreduce);
// compress/src/sparse_allreduce.hpp): every worker holds the same update, made of the workers'
// summed selections at up to 3k indices (kSparseAllreduceKeep), at any number of workers (odd ones
// included); a worker's bytes stay within 6k (W-1)/W pairs whatever the workers; regions rebalance
// from the selections and resume to
// the bit; an empty region and a worker whose gradient is zero pass. exchange auto picks the
// all-gather or the sparse all-reduce by the model's link bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "bucket_test_util.hpp"
#include "common/error_message.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

const BucketParam kParams0[] = {{1, 4000}}, kParams1[] = {{2, 3000}};

std::vector<float> grad0(int s, int rank) {
  return gs::testing::grad(4000, 100 * std::uint64_t(s) + std::uint64_t(rank));
}
std::vector<float> grad1(int s, int rank) {
  return gs::testing::grad(3000, 100 * std::uint64_t(s) + 50 + std::uint64_t(rank));
}

// One step of two buckets on one worker: the update.
std::vector<float> step(BucketCompressor& c, Collectives& comm, int s) {
  const auto g0 = grad0(s, comm.rank()), g1 = grad1(s, comm.rank());
  std::vector<float> out(7000);
  c.exchange(0, g0, kParams0, comm, std::span<float>(out).first(4000), false);
  c.exchange(1, g1, kParams1, comm, std::span<float>(out).subspan(4000), true);
  return out;
}

std::unique_ptr<BucketCompressor> sparse_core(const std::string& method, int rank) {
  auto c = gs::testing::make_bucket(method, 0.01, rank);
  c->set_exchange(ExchangeMode::sparse_allreduce);
  return c;
}

std::size_t nonzeros(std::span<const float> v) {
  return std::size_t(std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; }));
}

}  // namespace

// At the first step (no residual yet, even regions) the update is, at each of its indices, the sum
// in rank order of the workers' top-k values there, over W; as many indices as the workers selected
// up to 3k (each region's share of 3k, rounded), and the indices whose sums are largest within
// their region.
TEST(SparseAllreduce, EveryWorkerHoldsTheSameUpdateOfSummedSelectionsAtAnyWorldSize) {
  for (int w : {2, 3, 4, 8}) {
    std::vector<std::vector<float>> first(static_cast<std::size_t>(w)), last(static_cast<std::size_t>(w));
    run_workers(w, [&](Collectives& comm) {
      auto c = sparse_core("topk", comm.rank());
      for (int s = 0; s < 4; ++s) {
        auto out = step(*c, comm, s);
        if (s == 0) first[std::size_t(comm.rank())] = out;
        last[std::size_t(comm.rank())] = std::move(out);
      }
    });
    for (int r = 1; r < w; ++r) {
      EXPECT_EQ(first[std::size_t(r)], first[0]) << w << " workers, rank " << r;
      EXPECT_EQ(last[std::size_t(r)], last[0]) << w << " workers, rank " << r;
    }
    // The oracle of bucket 0 at step 0: each worker's top 40 of its gradient, summed per index.
    std::map<std::int32_t, float> sums;
    for (int r = 0; r < w; ++r) {
      auto topk = make_compressor("topk", 0.01, gs::testing::seeded(r));
      const auto g = grad0(0, r);
      const auto sel = topk->compress(g, "b0").payload;
      std::vector<std::pair<std::int32_t, float>> pairs;
      for (std::size_t j = 0; j < sel.count(); ++j) pairs.emplace_back(sel.indices[j], sel.values[j]);
      for (const auto& [i, v] : pairs) {
        const auto it = sums.find(i);
        if (it == sums.end())
          sums[i] = v;
        else
          it->second += v;
      }
    }
    const std::span<const float> update(first[0].data(), 4000);
    const std::size_t kept = nonzeros(update), keep = std::size_t(kSparseAllreduceKeep) * 40;
    ASSERT_EQ(kSparseAllreduceKeep, 3);
    EXPECT_LE(kept, std::min(sums.size(), keep + std::size_t(w))) << w;
    EXPECT_GE(kept, std::min(sums.size(), keep - std::size_t(w))) << w;
    if (sums.size() <= keep) {
      EXPECT_EQ(kept, sums.size()) << w << ": every selected index kept";
    }
    const float inv = 1.0f / float(w);
    for (std::int32_t i = 0; i < 4000; ++i) {
      if (update[std::size_t(i)] == 0.0f) continue;
      ASSERT_TRUE(sums.count(i)) << w << " workers: index " << i << " was selected by no worker";
      EXPECT_EQ(update[std::size_t(i)], sums[i] * inv) << w << " workers, index " << i;
    }
    // Within a region (even at the first step), no sum left out is larger than one kept.
    for (int d = 0; d < w; ++d) {
      const std::int32_t lo = std::int32_t(4000 * d / w), hi = std::int32_t(4000 * (d + 1) / w);
      float smallest_kept = INFINITY, largest_left = 0.0f;
      for (const auto& [i, v] : sums) {
        if (i < lo || i >= hi) continue;
        if (update[std::size_t(i)] != 0.0f)
          smallest_kept = std::min(smallest_kept, std::fabs(v));
        else
          largest_left = std::max(largest_left, std::fabs(v));
      }
      EXPECT_LE(largest_left, smallest_kept) << w << " workers, region " << d;
    }
  }
}

// What a worker sends: its selection outside its own region (about k (W-1)/W pairs of 8 bytes),
// the counts (W int64), its kept sums (up to 3k/W pairs) and the NaN flag: within 6k(W-1)/W pairs
// plus headers at every W, where the all-gather's (W-1)k pairs grow with W.
TEST(SparseAllreduce, AWorkersBytesStayWithin6kPairsWhateverTheWorkers) {
  for (int w : {2, 4, 8}) {
    std::vector<std::uint64_t> bytes(static_cast<std::size_t>(w));
    run_workers(w, [&](Collectives& comm) {
      auto c = sparse_core("sidco-e", comm.rank());
      for (int s = 0; s < 3; ++s) step(*c, comm, s);
      bytes[std::size_t(comm.rank())] = c->history().back().bytes_sent;
    });
    const double k = 40 + 30, pairs = 6.0 * k * double(w - 1) / double(w);
    const double headers = 2 * (8.0 + 8.0 * w);
    for (int r = 0; r < w; ++r) {
      EXPECT_LE(double(bytes[std::size_t(r)]), 8.0 * pairs + headers) << w << " workers, rank " << r;
      EXPECT_GT(bytes[std::size_t(r)], 0u);
    }
    if (w == 8) {  // the all-gather would bring 7k pairs; these send at most 6k * 7/8
      const auto most = *std::max_element(bytes.begin(), bytes.end());
      EXPECT_LT(double(most), 8.0 * 7.0 * k);
    }
  }
}

// The regions follow the update's indices (the same on every worker) and travel in the state: a
// run resumed after step 7, momentum correction on, goes on to the bit; a state without them (the
// all-gather's) does not load.
TEST(SparseAllreduce, ResumesToTheBitAcrossTheRebalancing) {
  for (int w : {2, 3}) {
    run_workers(w, [&](Collectives& comm) {
      auto make = [&] {
        auto c = sparse_core("sidco-e", comm.rank());
        c->set_momentum_correction(0.9, "momentum");
        return c;
      };
      auto original = make();
      for (int s = 0; s < 7; ++s) step(*original, comm, s);
      gs::StateWriter w1;
      original->save_state(w1);
      const std::string saved = w1.take();
      std::vector<std::vector<float>> expected;
      for (int s = 7; s < 12; ++s) expected.push_back(step(*original, comm, s));
      auto resumed = make();
      gs::StateReader r(saved, "state");
      resumed->load_state(r);
      for (int s = 7; s < 12; ++s) ASSERT_EQ(step(*resumed, comm, s), expected[std::size_t(s - 7)]) << s;
      auto allgather = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
      allgather->set_momentum_correction(0.9, "momentum");
      gs::StateReader r2(saved, "state");
      EXPECT_NE(error_message([&] { allgather->load_state(r2); }).find("the exchange"), std::string::npos);
    });
  }
}

// A region nothing falls in (every worker's gradient lives in the first quarter) and a worker
// whose gradient is zero: the exchange goes on, the same on every worker, the zero worker's
// residual untouched by what it did not send.
TEST(SparseAllreduce, AnEmptyRegionAndAWorkerWithAZeroGradientPass) {
  std::vector<std::vector<float>> outs(4);
  run_workers(4, [&](Collectives& comm) {
    auto c = sparse_core("topk", comm.rank());
    for (int s = 0; s < 3; ++s) {
      auto g = gs::testing::grad(4000, 7 * std::uint64_t(s) + std::uint64_t(comm.rank()));
      std::fill(g.begin() + 1000, g.end(), 0.0f);                 // regions 1 to 3 (even bounds) get nothing
      if (comm.rank() == 3) std::fill(g.begin(), g.end(), 0.0f);  // a worker with nothing to give
      std::vector<float> out(4000);
      c->exchange(0, g, kParams0, comm, out, true);
      outs[std::size_t(comm.rank())] = out;
    }
  });
  for (int r = 1; r < 4; ++r) EXPECT_EQ(outs[std::size_t(r)], outs[0]) << r;
  EXPECT_GT(nonzeros(std::span<const float>(outs[0]).first(1000)), 0u);
  EXPECT_EQ(nonzeros(std::span<const float>(outs[0]).subspan(1000)), 0u);
}

TEST(SparseAllreduce, RefusesCompressorsWithoutASparseSelection) {
  for (const char* name : {"qsgd-mn", "none"}) {
    auto c = gs::testing::make_bucket(name, 1.0, 0);
    EXPECT_NE(error_message([&] { c->set_exchange(ExchangeMode::sparse_allreduce); }).find("sends no sparse selection"),
              std::string::npos)
        << name;
  }
  EXPECT_NE(error_message([] { exchange_mode("broadcast", "exchange"); }).find("unknown exchange 'broadcast'"),
            std::string::npos);
}

// The all-to-all every Collectives has (ThreadCollectives' own, and the default over allgather):
// each worker gets what each other had for it, empty parts included.
TEST(SparseAllreduce, AllToAllDeliversEachPartToItsWorkerOnly) {
  run_workers(3, [&](Collectives& comm) {
    std::vector<std::vector<std::byte>> parts(3);
    for (int d = 0; d < 3; ++d)
      parts[std::size_t(d)].assign(std::size_t(comm.rank() * d), std::byte(10 * comm.rank() + d));
    const auto got = comm.alltoall(parts);
    const auto by_default = comm.Collectives::alltoall(parts);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got, by_default);
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(got[std::size_t(s)],
                std::vector<std::byte>(std::size_t(s * comm.rank()), std::byte(10 * s + comm.rank())));
  });
}

// exchange auto: the all-gather at 2 workers (and at 3 unless the density is very low), the sparse
// all-reduce from 4 on; never more link bytes than the all-gather by the model it decides with, at
// any workers and density; a compressor without a sparse selection keeps its own exchange.
TEST(ExchangeAuto, ChoosesByTheLinkBytesOfTheModel) {
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 2, 0.01, true), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 3, 0.01, true), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 4, 0.0001, true), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 6, 0.01, true), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 6, 0.001, true), ExchangeMode::sparse_allreduce);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 7, 0.01, true), ExchangeMode::sparse_allreduce);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 1024, 0.1, true), ExchangeMode::sparse_allreduce);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 8, 0.01, false), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::automatic, 8, 1.0, true), ExchangeMode::allgather);
  EXPECT_EQ(resolve_exchange(ExchangeMode::shared, 2, 0.01, true), ExchangeMode::shared);
  EXPECT_EQ(resolve_exchange(ExchangeMode::sparse_allreduce, 2, 0.01, true), ExchangeMode::sparse_allreduce);
  for (int w = 2; w <= 1024; w *= 2)
    for (double d : {0.3, 0.1, 0.01, 0.001, 0.0001}) {
      const double pair = 4.0 + (std::log2(1.0 / d) + 2.0) / 8.0, k = 1e6 * d;
      const double gather = (w - 1) * pair * k, reduce = (1.0 + std::min(3, w)) * (w - 1) / w * 8.0 * k;
      const double chosen =
          resolve_exchange(ExchangeMode::automatic, w, d, true) == ExchangeMode::allgather ? gather : reduce;
      EXPECT_LE(chosen, gather) << w << " workers at " << d;
      EXPECT_EQ(chosen, std::min(gather, reduce)) << w << " workers at " << d;
    }
  EXPECT_EQ(exchange_mode("auto", "exchange"), ExchangeMode::automatic);
}

// In the hook's core: at 2 workers auto runs the all-gather and at 8 the sparse all-reduce, each
// step recording it, with the updates of that exchange set by name.
TEST(ExchangeAuto, RunsTheChosenExchangeAndRecordsIt) {
  for (int w : {2, 8}) {
    std::vector<std::vector<float>> chosen(static_cast<std::size_t>(w)), named(static_cast<std::size_t>(w));
    std::vector<int> recorded(static_cast<std::size_t>(w));
    run_workers(w, [&](Collectives& comm) {
      auto automatic = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
      automatic->set_exchange(ExchangeMode::automatic);
      auto by_name = gs::testing::make_bucket("sidco-e", 0.01, comm.rank());
      by_name->set_exchange(w == 2 ? ExchangeMode::allgather : ExchangeMode::sparse_allreduce);
      for (int s = 0; s < 4; ++s) {
        chosen[std::size_t(comm.rank())] = step(*automatic, comm, s);
        named[std::size_t(comm.rank())] = step(*by_name, comm, s);
      }
      recorded[std::size_t(comm.rank())] = automatic->history().back().exchange;
    });
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(chosen[std::size_t(r)], named[std::size_t(r)]) << w << " workers, rank " << r;
      EXPECT_EQ(recorded[std::size_t(r)], int(w == 2 ? ExchangeMode::allgather : ExchangeMode::sparse_allreduce)) << w;
    }
  }
  // Any compressor takes auto: without a sparse selection it keeps its own exchange.
  auto quantizer = gs::testing::make_bucket("qsgd-mn", 1.0, 0);
  EXPECT_NO_THROW(quantizer->set_exchange(ExchangeMode::automatic));
}

namespace {

// Passes every call through and counts the collective calls of each kind.
class CountingCollectives final : public Collectives {
 public:
  explicit CountingCollectives(Collectives& inner) : inner_(inner) {}
  int reduces = 0, allgathers = 0, known = 0, alltoalls = 0;
  int world_size() const override { return inner_.world_size(); }
  int rank() const override { return inner_.rank(); }
  void allreduce_max(std::span<float> v) override {
    ++reduces;
    inner_.allreduce_max(v);
  }
  void allreduce_min(std::span<std::int8_t> v) override {
    ++reduces;
    inner_.allreduce_min(v);
  }
  void allreduce_sum(std::span<std::int8_t> v) override {
    ++reduces;
    inner_.allreduce_sum(v);
  }
  void allreduce_sum(std::span<std::int32_t> v) override {
    ++reduces;
    inner_.allreduce_sum(v);
  }
  void allreduce_sum(std::span<std::int64_t> v) override {
    ++reduces;
    inner_.allreduce_sum(v);
  }
  void allreduce_sum(std::span<float> v) override {
    ++reduces;
    inner_.allreduce_sum(v);
  }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    ++allgathers;
    return inner_.allgather(mine);
  }
  std::vector<std::vector<std::byte>> allgather_known(std::span<const std::byte> mine,
                                                      std::span<const std::uint64_t> sizes) override {
    ++known;
    return inner_.allgather_known(mine, sizes);
  }
  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override {
    ++alltoalls;
    return inner_.alltoall(to_each);
  }

 private:
  Collectives& inner_;
};

}  // namespace

// A bucket takes three collective calls, four rounds where the all-to-all tells its sizes first:
// the all-to-all, one all-reduce of the counts that also carries the NaN/Inf flag, and the kept
// sums all-gathered with their sizes known from the counts (no round of sizes). A bucket with NaN
// on one worker takes the same calls and is skipped on every worker.
TEST(SparseAllreduce, ABucketTakesAnAllToAllOneAllReduceAndAnAllGatherOfKnownSizes) {
  const int w = 3;
  std::vector<std::vector<int>> calls(w);
  std::vector<bool> skipped(w);
  run_workers(w, [&](Collectives& inner) {
    auto c = sparse_core("sidco-e", inner.rank());
    step(*c, inner, 0);  // the first step agrees on the settings
    CountingCollectives comm(inner);
    step(*c, comm, 1);
    calls[std::size_t(inner.rank())] = {comm.reduces, comm.alltoalls, comm.known, comm.allgathers};
    auto g0 = grad0(2, inner.rank()), g1 = grad1(2, inner.rank());
    if (inner.rank() == 1) g1[7] = std::nanf("");
    std::vector<float> out(7000);
    c->exchange(0, g0, kParams0, comm, std::span<float>(out).first(4000), false);
    c->exchange(1, g1, kParams1, comm, std::span<float>(out).subspan(4000), true);
    calls[std::size_t(inner.rank())].push_back(comm.reduces);
    skipped[std::size_t(inner.rank())] = c->last_step_skipped();
  });
  for (int r = 0; r < w; ++r) {
    // two buckets: 2 all-reduces, 2 all-to-alls, 2 all-gathers of known sizes, none of unknown
    EXPECT_EQ(calls[std::size_t(r)], (std::vector<int>{2, 2, 2, 0, 4})) << "rank " << r;
    EXPECT_TRUE(skipped[std::size_t(r)]) << "rank " << r;
  }
}
