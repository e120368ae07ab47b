#pragma once
// The element-wise work of the DDP hook's exchange with device collectives (vector_ops.hpp), as
// GS_HD bodies: the send buffer packed from a selection and its report, the skip decided from the
// counts gathered with the pairs, the rank-ordered sum and the residual's masking, all read from
// device memory, so no count crosses to the host. A send buffer: slot 0 the count (-1: NaN/Inf),
// slots 1.. the pairs.
#include <cstdint>

#include "gs/base/hostdevice.hpp"
#include "gs/kernels/types.hpp"
#include "gs/kernels/vector_ops.hpp"

namespace gs::kernels::portable {

GS_HD inline std::uint64_t sent_count(const SelectionReport& r, std::uint64_t capacity) {
  return r.count < capacity ? r.count : capacity;
}

struct PackPairs {  // the count (j = 0), the pairs, and zeros past them (the padding travels too)
  const std::int32_t* idx;
  const float* val;
  const SelectionReport* report;
  std::uint64_t capacity;
  std::int32_t* send_idx;
  float* send_val;
  GS_HD void operator()(std::uint64_t j) const {
    if (j == 0) {
      send_idx[0] = report->nonfinite > 0 ? -1 : std::int32_t(sent_count(*report, capacity));
      send_val[0] = 0.0f;
    }
    if (j >= capacity) return;  // capacity 0: the count alone
    const bool pair = j < sent_count(*report, capacity);
    send_idx[1 + j] = pair ? idx[j] : 0;
    send_val[1 + j] = pair ? val[j] : 0.0f;
  }
};
struct GatheredSkip {  // a worker that sent -1 met NaN or Inf: every worker skips the bucket
  const std::int32_t* idx_all;
  std::uint64_t stride;
  int workers;
  std::int32_t* bucket_skip;
  std::int32_t* step_skip;
  GS_HD void operator()(std::uint64_t) const {
    bool any = false;
    for (int r = 0; r < workers; ++r) any = any || idx_all[std::uint64_t(r) * stride] < 0;
    *bucket_skip = any ? 1 : 0;
    if (any) *step_skip = 1;
  }
};
// The bucket's sum starts at zeros (as Compressor::aggregate), and its skip is decided by the
// element 0's thread on the way.
struct ZerosAndSkip {
  float* out;
  GatheredSkip skip;
  GS_HD void operator()(std::uint64_t i) const {
    if (i == 0) skip(0);
    out[i] = 0.0f;
  }
};
struct AddSent {  // one worker's pairs into out (distinct indices: no two threads meet)
  float* out;
  const std::int32_t* send_idx;
  const float* send_val;
  const std::int32_t* bucket_skip;
  GS_HD void operator()(std::uint64_t j) const {
    if (*bucket_skip || std::int64_t(j) >= std::int64_t(send_idx[0])) return;
    out[send_idx[1 + j]] += send_val[1 + j];
  }
};
struct ZeroSent {
  float* acc;
  const std::int32_t* send_idx;
  const std::int32_t* bucket_skip;
  GS_HD void operator()(std::uint64_t j) const {
    if (*bucket_skip || std::int64_t(j) >= std::int64_t(send_idx[0])) return;
    acc[send_idx[1 + j]] = 0.0f;
  }
};
struct RestoreIf {
  float* v;
  const float* old;
  const std::int32_t* skip;
  GS_HD void operator()(std::uint64_t i) const {
    if (*skip) v[i] = old[i];
  }
};
struct ReportExchange {
  const SelectionReport* report;
  const std::int32_t* send_idx;
  std::uint64_t capacity;
  const std::int32_t* bucket_skip;
  ExchangeReport* out;
  GS_HD void operator()(std::uint64_t) const {
    ExchangeReport e;
    e.selection = *report;
    e.sent = send_idx[0] < 0 ? 0 : std::uint64_t(send_idx[0]);
    e.overflow = report->count > capacity ? report->count - capacity : 0;
    e.skipped = *bucket_skip;
    *out = e;
  }
};

}  // namespace gs::kernels::portable
