#pragma once
// gs::kernels::Selector over a backend's primitives P (the CUDA backend's and cuda-host's).
#include <algorithm>
#include <limits>
#include <string>

#include "gs/kernels/select.hpp"
#include "passes.hpp"

namespace gs::kernels::portable {

template <class P>
class PortableSelector final : public Selector {
 public:
  PortableSelector(P prims, BackendKind kind) : p_(std::move(prims)), kind_(kind) {}
  BackendKind kind() const override { return kind_; }

  const float* place(std::span<const float> host) override {
    if (staged_.size() < host.size()) staged_ = p_.template alloc<float>(host.size());
    p_.upload(staged_.data(), host.data(), host.size());
    return staged_.data();
  }
  std::unique_ptr<MagnitudePasses> passes(const float* g, std::uint64_t n) override {
    return std::make_unique<Passes<P>>(p_, g, n);
  }
  std::uint64_t nonfinite(const float* g, std::uint64_t n) override {
    return n - portable::count_above(p_, g, n, -1.0);
  }
  void above(const float* g, std::uint64_t n, double threshold, Selection<std::int32_t>& out) override {
    check_int32(n);
    auto idx = p_.template alloc<std::int32_t>(n);
    auto val = p_.template alloc<float>(n);
    const std::uint64_t m = compact_above(p_, g, n, threshold, idx.data(), val.data(), n);
    download(idx, val, m, out);
  }
  void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) override {
    check_int32(n);
    k = std::min(k, portable::count_above(p_, g, n, -1.0));
    auto idx = p_.template alloc<std::int32_t>(k);
    auto val = p_.template alloc<float>(k);
    portable::topk(p_, g, n, k, idx.data(), val.data());
    download(idx, val, k, out);
  }
  SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                               Selection<std::int32_t>& out) override {
    SidcoSelectResult r = portable::sidco_topk(p_, g, n, density, stages, out);
    r.nonfinite = nonfinite(g, n);  // no pass of its own counts them
    return r;
  }

 private:
  static void check_int32(std::uint64_t n) { check_index_range<std::int32_t>(n, "selection"); }
  void download(const Buffer<P, std::int32_t>& idx, const Buffer<P, float>& val, std::uint64_t m,
                Selection<std::int32_t>& out) {
    out.indices = p_.download(idx.data(), m);
    out.values = p_.download(val.data(), m);
  }

  P p_;
  BackendKind kind_;
  Buffer<P, float> staged_;
};

}  // namespace gs::kernels::portable
