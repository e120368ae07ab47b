#pragma once
// gs::kernels::Selector over a backend's primitives P (the CUDA backend's and cuda-host's).
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
  std::unique_ptr<MagnitudePasses> passes(const float* g, std::uint64_t n) override {
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
    auto idx = p.template alloc<std::int32_t>(n);
    auto val = p.template alloc<float>(n);
    const std::uint64_t m = compact_above(p, g, n, threshold, idx.data(), val.data(), n);
    download(p, idx, val, m, out);
  }
  void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) override {
    check_int32(n);
    auto call = b_.call(g);
    P& p = call.prims();
    k = std::min(k, portable::count_above(p, g, n, -1.0));
    auto idx = p.template alloc<std::int32_t>(k);
    auto val = p.template alloc<float>(k);
    portable::topk(p, g, n, k, idx.data(), val.data());
    download(p, idx, val, k, out);
  }
  SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                               Selection<std::int32_t>& out) override {
    SidcoSelectResult r;
    {
      auto call = b_.call(g);
      r = portable::sidco_topk(call.prims(), g, n, density, stages, out);
    }
    r.nonfinite = nonfinite(g, n);  // no pass of its own counts them
    return r;
  }

 private:
  static void check_int32(std::uint64_t n) { check_index_range<std::int32_t>(n, "selection"); }
  static void download(P& p, const Buffer<P, std::int32_t>& idx, const Buffer<P, float>& val, std::uint64_t m,
                       Selection<std::int32_t>& out) {
    out.indices = p.download(idx.data(), m);
    out.values = p.download(val.data(), m);
  }

  B b_;
  BackendKind kind_;
  Buffer<P, float> staged_;
};

}  // namespace gs::kernels::portable
