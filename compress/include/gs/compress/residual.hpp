#pragma once
// Residual memory (error feedback), one residual vector e per named vector:
//   acc = g + e;  send part of acc;  e = acc with the sent entries zeroed.
// For sparse payloads (values taken from acc exactly) scatter(values, idx) + e == acc holds element
// for element, exactly: no gradient mass is ever lost, it only waits. Dense payloads leave
// e = acc - decoded.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/compress/compressor.hpp"

namespace gs::compress {

class ResidualMemory {
 public:
  // acc = g + e for `name` (e starts at 0; g must keep the size it had the first time). The span
  // stays valid until the next accumulate() for the same name. With a decay, acc = decay e + g:
  // the same memory then keeps momentum correction's velocity (gs/compress/momentum.hpp). With
  // stats, the pass takes stats->fields of acc on the way (StatsOnWrite).
  std::span<const float> accumulate(std::string_view name, std::span<const float> g, float decay = 1.0f,
                                    StatsOnWrite* stats = nullptr);
  // accumulate()'s start, for a caller that writes acc itself in a pass of its own (momentum
  // correction's velocity and residual in one): the slot's e (n zeros the first time; gs::Error
  // for another size than before) and its acc to fill, pending from here as after accumulate().
  struct Accumulation {
    std::span<const float> e;
    std::span<float> acc;
  };
  Accumulation begin_accumulate(std::string_view name, std::size_t n);
  // After sending p (computed from the last accumulate() of name): e = acc, sent entries zeroed
  // (sparse) or e = acc - decoded (dense, decoded through c).
  void commit(std::string_view name, const Payload& p, const Compressor& c);
  // Same, for compressors that decode their own contribution: e = acc - sent.
  void commit_decoded(std::string_view name, std::span<const float> sent);

  // The whole of the last accumulate() of `name` was sent (an uncompressed step): e = 0, as
  // commit() of a dense payload of acc itself leaves it, without the payload.
  void commit_all(std::string_view name);
  // The last accumulate() of `name` becomes e whole (nothing of it sent).
  void keep(std::string_view name);
  // Drops the last accumulate() of `name` uncommitted: e stays as it was (a skipped step).
  void discard(std::string_view name);
  // Sets e for `name` (a new slot, or a whole new residual), and gives write access to it, for a
  // caller that moves residuals between slots (BucketCompressor when DDP regroups parameters).
  void assign(std::string_view name, std::vector<float> e);
  std::span<float> residual_for_update(std::string_view name);
  void erase(std::string_view name);

  bool contains(std::string_view name) const;
  std::span<const float> residual(std::string_view name) const;  // gs::Error if unknown
  std::span<const float> accumulator(std::string_view name) const;
  std::size_t size() const { return slots_.size(); }
  void clear() { slots_.clear(); }
  // Every residual by name, for checkpoints (between steps: nothing pending).
  void save_state(StateWriter& w) const;
  void load_state(StateReader& r);

 private:
  struct Slot {
    std::vector<float> e, acc;
    bool pending = false;  // accumulate() done, commit() not yet
  };
  Slot& slot(std::string_view name);
  const Slot& slot(std::string_view name) const;
  std::map<std::string, Slot, std::less<>> slots_;
};

}  // namespace gs::compress
