#pragma once
// PythonCollectives: gs::compress::Collectives over a Python object, so that the compressors with
// their own exchange protocol (the quantizers, fft) run over torch.distributed. Each call takes
// the GIL and hands the object a NumPy view of the C++ buffer, valid for the call; the object
// reduces it in place (see gradscope/ddp.py, TorchCollectives).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "gs/compress/collectives.hpp"
#include "gs/kernels/device.hpp"

namespace gs::python {

// The copies torch made between host and device inside the collective just called (a group over
// NCCL alone reduces host buffers on the device: up, and back, waiting), as the object counted
// them (take_copies() -> (bytes, synchronizations)), into this thread's bus bytes and host syncs,
// which the hook's statistics read around a bucket. Holds the GIL.
inline void count_copies(const pybind11::object& impl) {
  if (!pybind11::hasattr(impl, "take_copies")) return;
  const auto [bytes, syncs] = impl.attr("take_copies")().cast<std::pair<std::uint64_t, std::uint64_t>>();
  kernels::add_bus_bytes(bytes);
  for (std::uint64_t i = 0; i < syncs; ++i) kernels::add_host_sync(kernels::SyncKind::copy);
}

class PythonCollectives final : public compress::Collectives {
 public:
  explicit PythonCollectives(pybind11::object impl) : impl_(std::move(impl)) {
    pybind11::gil_scoped_acquire gil;
    rank_ = impl_.attr("rank").cast<int>();
    world_ = impl_.attr("world_size").cast<int>();
  }
  ~PythonCollectives() override {
    pybind11::gil_scoped_acquire gil;
    impl_ = pybind11::object();
  }

  int world_size() const override { return world_; }
  int rank() const override { return rank_; }
  void allreduce_max(std::span<float> v) override { call("allreduce_max", v); }
  void allreduce_min(std::span<std::int8_t> v) override { call("allreduce_min", v); }
  void allreduce_sum(std::span<std::int8_t> v) override { call("allreduce_sum", v); }
  void allreduce_sum(std::span<std::int32_t> v) override { call("allreduce_sum", v); }
  void allreduce_sum(std::span<std::int64_t> v) override { call("allreduce_sum", v); }
  void allreduce_sum(std::span<float> v) override { call("allreduce_sum", v); }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    pybind11::gil_scoped_acquire gil;
    const auto* p = reinterpret_cast<const std::uint8_t*>(mine.data());
    const pybind11::array_t<std::uint8_t> view({mine.size()}, {1}, p, pybind11::none());
    const auto parts = impl_.attr("allgather")(view).cast<std::vector<pybind11::bytes>>();
    count_copies(impl_);
    return byte_parts(parts);
  }

  std::vector<std::vector<std::byte>> allgather_known(std::span<const std::byte> mine,
                                                      std::span<const std::uint64_t> sizes) override {
    pybind11::gil_scoped_acquire gil;
    if (!pybind11::hasattr(impl_, "allgather_known")) return compress::Collectives::allgather_known(mine, sizes);
    const auto* p = reinterpret_cast<const std::uint8_t*>(mine.data());
    const pybind11::array_t<std::uint8_t> view({mine.size()}, {1}, p, pybind11::none());
    const std::vector<std::uint64_t> known(sizes.begin(), sizes.end());
    const auto parts = impl_.attr("allgather_known")(view, known).cast<std::vector<pybind11::bytes>>();
    count_copies(impl_);
    return byte_parts(parts);
  }

  std::vector<std::vector<std::byte>> alltoall(const std::vector<std::vector<std::byte>>& to_each) override {
    pybind11::gil_scoped_acquire gil;
    if (!pybind11::hasattr(impl_, "alltoall")) return compress::Collectives::alltoall(to_each);
    pybind11::list parts;
    for (const auto& part : to_each)
      parts.append(pybind11::bytes(reinterpret_cast<const char*>(part.data()), part.size()));
    const auto got = impl_.attr("alltoall")(parts).cast<std::vector<pybind11::bytes>>();
    count_copies(impl_);
    return byte_parts(got);
  }

 private:
  // Python's bytes objects as C++ byte vectors (the GIL held).
  static std::vector<std::vector<std::byte>> byte_parts(const std::vector<pybind11::bytes>& parts) {
    std::vector<std::vector<std::byte>> out;
    for (const auto& part : parts) {
      const std::string s = part;
      out.emplace_back(reinterpret_cast<const std::byte*>(s.data()),
                       reinterpret_cast<const std::byte*>(s.data()) + s.size());
    }
    return out;
  }

  template <class T>
  void call(const char* op, std::span<T> v) {
    pybind11::gil_scoped_acquire gil;
    // A writable view without a copy: the base object keeps NumPy from copying or freeing.
    pybind11::array_t<T> view({v.size()}, {sizeof(T)}, v.data(), pybind11::none());
    impl_.attr(op)(view);
    count_copies(impl_);
  }

  pybind11::object impl_;
  int rank_ = 0, world_ = 1;
};

// gs::compress::DeviceCollectives over the same Python object (its allgather_pairs and
// allreduce_sum_device, which wrap the device memory at the addresses given as
// tensors of the collectives' device; see gradscope/ddp.py).
class PythonDeviceCollectives final : public compress::DeviceCollectives {
 public:
  explicit PythonDeviceCollectives(pybind11::object impl) : impl_(std::move(impl)) {}
  ~PythonDeviceCollectives() override {
    pybind11::gil_scoped_acquire gil;
    impl_ = pybind11::object();
  }
  void allgather(const std::int32_t* indices, const float* values, std::uint64_t count, std::int32_t* indices_all,
                 float* values_all) override {
    pybind11::gil_scoped_acquire gil;
    impl_.attr("allgather_pairs")(address(indices), address(values), count, address(indices_all), address(values_all));
    count_copies(impl_);
  }
  void allreduce_sum(float* values, std::uint64_t n) override {
    pybind11::gil_scoped_acquire gil;
    impl_.attr("allreduce_sum_device")(address(values), n);
    count_copies(impl_);
  }

 private:
  static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  pybind11::object impl_;
};

}  // namespace gs::python
