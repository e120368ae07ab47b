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
  GS_HD bool any() const {
    bool any = false;
    for (int r = 0; r < workers; ++r) any = any || idx_all[std::uint64_t(r) * stride] < 0;
    return any;
  }
  GS_HD void operator()(std::uint64_t) const {
    const bool skip = any();
    *bucket_skip = skip ? 1 : 0;
    if (skip) *step_skip = 1;
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
// The first worker's pairs into out, the bucket's skip decided by every thread from the gathered
// counts (a worker that sent -1), written by thread 0 for the launches after it.
struct AddFirstSent {
  float* out;
  const std::int32_t* idx_all;
  const float* val_all;
  std::uint64_t capacity;
  GatheredSkip skip;
  GS_HD void operator()(std::uint64_t j) const {
    if (j == 0) skip(0);
    if (skip.any() || j >= capacity || std::int64_t(j) >= std::int64_t(idx_all[0])) return;
    out[idx_all[1 + j]] += val_all[1 + j];
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

// ZeroSent over the send buffer's slots, and the bucket's report by the first thread.
struct ZeroSentAndReport {
  ZeroSent zero;
  ReportExchange report;
  std::uint64_t capacity;
  GS_HD void operator()(std::uint64_t j) const {
    if (j == 0) report(0);
    if (j < capacity) zero(j);
  }
};

}  // namespace gs::kernels::portable
