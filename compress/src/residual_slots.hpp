#pragma once
// Internal: where BucketCompressor keeps its residual slots (one per bucket layout), as place(),
// checkpoints and a dropped step need them: on the host (ResidualMemory, host buckets) or in a
// backend's device memory (ResidentResiduals, the device buckets of exchange_resident).
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gs/compress/residual.hpp"
#include "gs/kernels/vector_ops.hpp"

namespace gs::compress::detail {

class ResidualSlots {
 public:
  virtual ~ResidualSlots() = default;
  virtual bool contains(const std::string& slot) const = 0;
  virtual void create(const std::string& slot, std::uint64_t n) = 0;  // zeros
  virtual void erase(const std::string& slot) = 0;
  virtual void clear() = 0;
  // e(dst)[at, at + count) = e(src)[from, from + count), between two slots.
  virtual void move(const std::string& dst, std::uint64_t at, const std::string& src, std::uint64_t from,
                    std::uint64_t count) = 0;
  virtual void write(const std::string& dst, std::uint64_t at, std::span<const float> values) = 0;
  virtual void zero(const std::string& dst, std::uint64_t at, std::uint64_t count) = 0;
  virtual std::vector<float> read(const std::string& slot, std::uint64_t at, std::uint64_t count) const = 0;
  // The step's accumulate of `slot` is dropped: e stays as it was.
  virtual void discard(const std::string& slot) = 0;
};

// The host's slots: a view of a ResidualMemory.
class HostSlots final : public ResidualSlots {
 public:
  explicit HostSlots(ResidualMemory& m) : m_(m) {}
  bool contains(const std::string& slot) const override { return m_.contains(slot); }
  void create(const std::string& slot, std::uint64_t n) override { m_.assign(slot, std::vector<float>(n, 0.0f)); }
  void erase(const std::string& slot) override { m_.erase(slot); }
  void clear() override { m_.clear(); }
  void move(const std::string& dst, std::uint64_t at, const std::string& src, std::uint64_t from,
            std::uint64_t count) override;
  void write(const std::string& dst, std::uint64_t at, std::span<const float> values) override;
  void zero(const std::string& dst, std::uint64_t at, std::uint64_t count) override;
  std::vector<float> read(const std::string& slot, std::uint64_t at, std::uint64_t count) const override;
  void discard(const std::string& slot) override { m_.discard(slot); }

 private:
  ResidualMemory& m_;
};

// Error feedback on a device: per slot the residual e and the step's accumulator acc = g + e, both
// in device memory. The sent entries are zeroed in acc where the selection lies, and committing a
// step makes acc the new e (ResidualMemory's rule for sparse payloads, on the device).
class ResidentResiduals final : public ResidualSlots {
 public:
  explicit ResidentResiduals(kernels::VectorOps& ops) : ops_(ops) {}
  bool contains(const std::string& slot) const override { return slots_.count(slot) != 0; }
  void create(const std::string& slot, std::uint64_t n) override;
  void erase(const std::string& slot) override { slots_.erase(slot); }
  void clear() override { slots_.clear(); }
  void move(const std::string& dst, std::uint64_t at, const std::string& src, std::uint64_t from,
            std::uint64_t count) override;
  void write(const std::string& dst, std::uint64_t at, std::span<const float> values) override;
  void zero(const std::string& dst, std::uint64_t at, std::uint64_t count) override;
  std::vector<float> read(const std::string& slot, std::uint64_t at, std::uint64_t count) const override;
  void discard(const std::string& slot) override { at(slot).pending = false; }

  // acc = g + e (g: n floats on the device); returns acc.
  const float* accumulate(const std::string& slot, const float* g, std::uint64_t n);
  // The same, leaving zeros in g (where the bucket's update is summed next) and *flag = 0 where
  // flag is given, in the same pass.
  const float* accumulate_clearing(const std::string& slot, float* g, std::uint64_t n, std::int32_t* flag);
  // acc[idx[j]] = 0 for the k indices sent (device memory).
  void zero_sent(const std::string& slot, const std::int32_t* idx, std::uint64_t k);
  // The same for the pairs a send buffer sent (VectorOps::pack_pairs), unless *skip (device
  // memory), and the bucket's report written to host memory (VectorOps::zero_sent_and_report).
  void zero_sent_and_report(const std::string& slot, const std::int32_t* send_idx, std::uint64_t capacity,
                            const std::int32_t* skip, const kernels::SelectionReport* report,
                            kernels::ExchangeReport* host);
  void commit(const std::string& slot);
  // commit(), or discard() where *skip (device memory): decided on the device.
  void commit_unless(const std::string& slot, const std::int32_t* skip);

  // A slot's exchange buffers with device collectives, kept from step to step (grown, never
  // shrunk: nothing is allocated in steady state): its send buffers of capacity + 1 pairs, the
  // gathered pairs of every worker, its skip flag; or, through the host, the other workers' pairs.
  struct Room {
    kernels::DeviceArray<std::int32_t> send_idx, idx_all, skip, up_idx;
    kernels::DeviceArray<float> send_val, val_all, up_val;
  };
  Room& gather_room(const std::string& slot, std::uint64_t capacity, std::uint64_t workers);
  // Room for `most` pairs, at least `usual` (twice the target count: one size serves step after step).
  Room& upload_room(const std::string& slot, std::uint64_t most, std::uint64_t usual);

 private:
  struct Slot {
    kernels::DeviceArray<float> e, acc;
    bool pending = false;
    Room room;
  };
  template <class T>
  void grow(kernels::DeviceArray<T>& a, std::uint64_t n);
  Slot& at(const std::string& slot);
  const Slot& at(const std::string& slot) const;
  // The slot of n elements with its accumulator made, marked pending (its e checked against n).
  Slot& pending_slot(const std::string& slot, std::uint64_t n);
  // e of `slot` while no step is pending on it (gs::Error otherwise), with [from, from + count) in it.
  float* residual_at(const std::string& slot, std::uint64_t from, std::uint64_t count);

  kernels::VectorOps& ops_;
  std::map<std::string, Slot> slots_;
};

}  // namespace gs::compress::detail
