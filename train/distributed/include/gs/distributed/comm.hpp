#pragma once
// Communicator: the collectives compressed training needs, over libtorch's c10d ProcessGroupGloo
// joined through a c10d TCPStore. Every call waits at most the configured timeout and then throws
// gs::Error (a dead or hung peer never hangs the others). It is the workers' compress::Collectives:
// ModelCompressor::step() exchanges every kind of payload through it (all-reduce of floats and
// integer codes, all-gather of variable-size bytes as counts first, then buffers padded to the
// largest count).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gs/compress/collectives.hpp"

namespace gs::distributed {

struct CommOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Rank 0 hosts the TCPStore unless someone else (the launcher) already does.
  bool store_hosted_elsewhere = false;
  std::chrono::milliseconds timeout{60000};
};

class Communicator final : public compress::Collectives {
 public:
  explicit Communicator(const CommOptions& options);
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override;
  int world_size() const override;

  // Overwrites every worker's buffers with rank 0's (float32 host buffers of equal sizes).
  void broadcast(std::vector<float>& values);
  // Element-wise over workers, in place (c10d MAX/MIN/SUM on float32, int8, int32, int64, float64).
  void allreduce_max(std::span<float> values) override;
  void allreduce_min(std::span<std::int8_t> values) override;
  void allreduce_sum(std::span<std::int8_t> values) override;
  void allreduce_sum(std::span<std::int32_t> values) override;
  void allreduce_sum(std::span<std::int64_t> values) override;
  void allreduce_sum(std::span<float> values) override;
  void allreduce_sum(std::span<double> values);
  // Every worker's bytes in rank order; sizes may differ.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  std::vector<std::vector<std::byte>> allgather_known(std::span<const std::byte> mine,
                                                      std::span<const std::uint64_t> sizes) override;
  // Each part to its worker only (c10d's all-to-all: the part sizes, then the bytes).
  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override;
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // All-reduce of a host buffer with c10d's reduce op `op` (a ReduceOp::RedOpType).
  template <class T>
  void reduce(std::span<T> values, int op, const char* what);
};

// A free TCP port on 127.0.0.1 at the time of the call (tests use it for manual placement).
int free_loopback_port();

}  // namespace gs::distributed
