#pragma once
// gs::kernels::Selector over a backend's primitives P (the CUDA backend's and cuda-host's). The
// selection buffers (n indices and values for above(), sidco-topk's n candidates) form a workspace
// kept from call to call on the device of the last call (grown, never shrunk), so a bucket costs
// no allocation from the pool's driver after its first step; the last selection stays there
// (resident_selection).
#include <algorithm>
#include <limits>
#include <string>

#include "gs/kernels/select.hpp"
#include "passes.hpp"

namespace gs::kernels::portable {

template <class B>  // a backend, as Passes<B>
class PortableSelector final : public Selector {
  using P = typename B::Prims;

 public:
  PortableSelector(B backend, BackendKind kind) : b_(std::move(backend)), kind_(kind) {}
  BackendKind kind() const override { return kind_; }

  const float* place(std::span<const float> host) override {
    auto call = b_.call(nullptr);
    P& p = call.prims();
    if (staged_.size() < host.size()) staged_ = p.template alloc<float>(host.size());
    p.upload(staged_.data(), host.data(), host.size());
    return staged_.data();
  }
  std::unique_ptr<fitting::MagnitudePasses> passes(const float* g, std::uint64_t n) override {
    return std::make_unique<Passes<B>>(b_, g, n);
  }
  std::uint64_t nonfinite(const float* g, std::uint64_t n) override {
    auto call = b_.call(g);
    return n - portable::count_above(call.prims(), g, n, -1.0);
  }
  void above(const float* g, std::uint64_t n, double threshold, Selection<std::int32_t>& out) override {
    check_int32(n);
    auto call = b_.call(g);
    P& p = call.prims();
    reserve(p, call.device(), n);
    const std::uint64_t m = compact_above(p, g, n, threshold, idx_.data(), val_.data(), n);
    keep(p, idx_.data(), val_.data(), m, out);
  }
  void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) override {
    check_int32(n);
    auto call = b_.call(g);
    P& p = call.prims();
    k = std::min(k, portable::count_above(p, g, n, -1.0));
    reserve(p, call.device(), k);
    portable::topk(p, g, n, k, idx_.data(), val_.data());
    keep(p, idx_.data(), val_.data(), k, out);
  }
  SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                               Selection<std::int32_t>& out) override {
    check_int32(n);
    SidcoSelectResult r;
    {
      auto call = b_.call(g);
      P& p = call.prims();
      reserve(p, call.device(), n);  // the candidates
      fitting::SidcoTopkBound plan(n, density, stages);
      auto sel = portable::sidco_topk<P, std::int32_t>(p, g, n, density, stages, plan, &idx_);
      keep(p, sel.indices.data(), sel.values.data(), sel.count, out);
      topk_idx_ = std::move(sel.indices);  // the selection lives on in these two
      topk_val_ = std::move(sel.values);
      r = topk_result(sel);
    }
    r.nonfinite = nonfinite(g, n);  // no pass of its own counts them
    return r;
  }
  Resident resident_selection() const override { return last_; }

 private:
  static void check_int32(std::uint64_t n) { check_index_range<std::int32_t>(n, "selection"); }
  // Workspace for m indices and values on `device` (reallocated on another device).
  void reserve(P& p, int device, std::uint64_t m) {
    if (device != ws_device_) {
      idx_ = {};
      val_ = {};
      topk_idx_ = {};
      topk_val_ = {};
      ws_device_ = device;
    }
    last_ = {};
    if (idx_.size() < m) idx_ = p.template alloc<std::int32_t>(m);
    if (val_.size() < m) val_ = p.template alloc<float>(m);
  }
  void keep(P& p, const std::int32_t* idx, const float* val, std::uint64_t m, Selection<std::int32_t>& out) {
    out.indices = p.download(idx, m);
    out.values = p.download(val, m);
    last_ = {idx, val, m};
  }

  B b_;
  BackendKind kind_;
  Buffer<P, float> staged_;
  int ws_device_ = -1;
  Buffer<P, std::int32_t> idx_, topk_idx_;
  Buffer<P, float> val_, topk_val_;
  Resident last_;
};

}  // namespace gs::kernels::portable
