#pragma once
// StockDense: the dense steps of compress-when auto through the framework's own all-reduce.
// gradscope.ddp hands such a step's buckets to DDP's stock all-reduce future on the model's process
// group, on the thread that calls the hook, instead of to the state's thread: a dense step then
// costs what DDP's own costs. The core keeps every rule of the step (the residual and momentum
// correction's velocity go with it, a non-finite sum skips it, the statistics and the gate's
// timing), split around the framework's all-reduce:
//   open     at the step's first bucket, before any of its buckets: opens the step as its first
//            bucket would (compress-when's choice) and says whether it goes this way;
//   prepare  each bucket, in order: g becomes what this worker all-reduces;
//   finish   each bucket, in the same order, once its all-reduce is done: the sum becomes the mean
//            update in place (zeros when it is not finite); the last one closes the step.
// A step that open() declines goes through BucketCompressor::exchange() as every other step.
#include <span>

#include "gs/compress/bucket_compressor.hpp"

namespace gs::compress {

struct StockDense {
  // True when the step is dense (compress-when auto's choice, or the warm-up) in a state whose
  // gate is on, with host buckets, its settings agreed, no density schedule and no error waiting;
  // then the step is open and its buckets take prepare() and finish(). False: the step (opened
  // or not) goes through exchange(). comm: the state's collectives (compress-when's choice).
  static bool open(BucketCompressor& c, Collectives& comm, unsigned element_bytes);
  // A bucket of the open dense step (as exchange() takes it: g, params, hook_seconds,
  // element_bytes): g is overwritten with this worker's share of the sum (its gradient with the
  // residual and the velocity); the framework then all-reduces g (a sum) over the workers.
  static void prepare(BucketCompressor& c, int index, std::span<float> g, std::span<const BucketParam> params,
                      Collectives& comm, bool last, double hook_seconds, unsigned element_bytes);
  // The bucket's sum over the workers, in place: the mean update (zeros when skipped).
  // comm_seconds: the all-reduce's busy time, which compress-when auto weighs.
  static void finish(BucketCompressor& c, int index, std::span<float> sum, Collectives& comm, bool last,
                     double comm_seconds, unsigned element_bytes);
};

}  // namespace gs::compress
