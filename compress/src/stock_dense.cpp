// StockDense (gs/compress/stock_dense.hpp): a dense step's buckets around the framework's all-reduce.
#include "gs/compress/stock_dense.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gs/base/error.hpp"
#include "gs/base/timing.hpp"
#include "bucket_exchange.hpp"
#include "timed_collectives.hpp"

namespace gs::compress {
namespace {

void require_dense(bool open_and_dense, int index) {
  if (!open_and_dense)
    throw Error("bucket " + std::to_string(index) + ": not a bucket of a dense step StockDense::open opened");
}

}  // namespace

bool StockDense::open(BucketCompressor& c, Collectives& comm, unsigned element_bytes) {
  if (c.mid_step() || c.failed_ || c.agree_pending_ || !c.refusal_.empty() || !c.gate_.on() || c.regimes_.on() ||
      c.resident_ || !c.ledger_->unsettled.empty() || !c.ledger_->pending_error.empty())
    return false;
  const auto t0 = Clock::now();
  TimedCollectives timed(comm);
  c.open_step(timed, element_bytes);
  StepStats& s = c.current_;  // begin_step made it: the choice's collective counts to this step
  s.comm_seconds += timed.seconds;
  s.link_bytes += std::uint64_t(std::llround(timed.link_bytes));
  s.compress_seconds += seconds_since(t0) - timed.seconds;
  return c.uncompressed_;
}

void StockDense::prepare(BucketCompressor& c, int index, std::span<float> g, std::span<const BucketParam> params,
                         Collectives& comm, bool last, double hook_seconds, unsigned element_bytes) {
  c.run_bucket(
      index, g.size(), element_bytes, last, hook_seconds, comm,
      [&](TimedCollectives&, StepStats&) {
        require_dense(c.step_open_ && c.uncompressed_, index);
        const std::string slot = c.place(params, g.size(), index);
        const std::string tensor = detail::tensor_name(*c.compressor_, slot, index);
        detail::BucketWork w = c.work(index, slot, tensor);
        detail::flush_dense(w, g, g);
        return false;
      },
      BucketCompressor::Part::prepare);
}

void StockDense::finish(BucketCompressor& c, int index, std::span<float> sum, Collectives& comm, bool last,
                        double comm_seconds, unsigned element_bytes) {
  c.run_bucket(
      index, sum.size(), element_bytes, last, 0.0, comm,
      [&](TimedCollectives& timed, StepStats& s) {
        require_dense(c.step_open_ && c.uncompressed_, index);
        s.comm_seconds += comm_seconds;
        timed.link_bytes += TimedCollectives::allreduce_link_bytes(comm.world_size(), double(sum.size_bytes()));
        const bool skipped = detail::finish_dense(sum, comm.world_size(), s);
        if (skipped) std::fill(sum.begin(), sum.end(), 0.0f);
        return skipped;
      },
      BucketCompressor::Part::finish);
}

}  // namespace gs::compress
