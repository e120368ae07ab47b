#pragma once
// Collectives: the operations a compressor with its own exchange protocol (Exchange::collective:
// quantizers that agree on a scale by all-reduce MAX before summing codes, frequency-domain methods
// that all-gather their own byte encoding) may call. Every worker calls the same operations in the
// same order with equal-sized buffers. Implementations: SoloCollectives (one worker, here),
// ThreadCollectives (workers as threads of one process, for tests and benchmarks), the Gloo
// communicator of train/distributed and PythonCollectives (python/src/, over torch.distributed).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gs::compress {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int world_size() const = 0;
  virtual int rank() const = 0;

  // Element-wise, in place, over every worker.
  virtual void allreduce_max(std::span<float> values) = 0;
  virtual void allreduce_min(std::span<std::int8_t> values) = 0;
  virtual void allreduce_sum(std::span<std::int8_t> values) = 0;
  virtual void allreduce_sum(std::span<std::int32_t> values) = 0;
  virtual void allreduce_sum(std::span<std::int64_t> values) = 0;
  virtual void allreduce_sum(std::span<float> values) = 0;
  // Every worker's bytes, in rank order (sizes may differ between workers).
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  // Personalized exchange: to_each[r] (world_size() parts, this worker's own included) goes to
  // worker r; returns what each worker had for this one, in rank order (sizes may differ). The
  // default goes through allgather, every part to every worker (the same result, but each worker
  // receives all the parts); an implementation over a framework's all-to-all sends each part to
  // its worker only.
  virtual std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each);
  // allgather() where every worker already knows every worker's size (sizes[r] bytes from worker
  // r, mine.size() == sizes[rank()]): an implementation may then skip the round that tells the
  // sizes. The default calls allgather() and checks the sizes.
  virtual std::vector<std::vector<std::byte>> allgather_known(std::span<const std::byte> mine,
                                                              std::span<const std::uint64_t> sizes);
};

// Collectives over buffers in device memory, for a framework whose collectives take them
// directly (torch.distributed over NCCL): the DDP hook's device path then exchanges a CUDA
// bucket's selection without it crossing the bus. Every worker calls the same operations in the
// same order; the caller orders its device work before each call and after it (the framework's
// collectives run after, and before, the calling thread's current stream).
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // Every worker's `count` indices and values (count equal everywhere: a fixed capacity, the
  // worker's own count travelling in its first slot) into indices_all and values_all
  // (world_size * count each, rank after rank).
  virtual void allgather(const std::int32_t* indices, const float* values, std::uint64_t count,
                         std::int32_t* indices_all, float* values_all) = 0;
  // Element-wise sum over the workers, in place.
  virtual void allreduce_sum(float* values, std::uint64_t n) = 0;
};

// One worker: every reduction is the identity, the all-gather returns the caller's bytes.
class SoloCollectives : public Collectives {
 public:
  int world_size() const override { return 1; }
  int rank() const override { return 0; }
  void allreduce_max(std::span<float>) override {}
  void allreduce_min(std::span<std::int8_t>) override {}
  void allreduce_sum(std::span<std::int8_t>) override {}
  void allreduce_sum(std::span<std::int32_t>) override {}
  void allreduce_sum(std::span<std::int64_t>) override {}
  void allreduce_sum(std::span<float>) override {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    return {std::vector<std::byte>(mine.begin(), mine.end())};
  }
};

}  // namespace gs::compress
