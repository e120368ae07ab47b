#pragma once
// gs::kernels::Selector over a backend's primitives P (the CUDA backend's and cuda-host's). Its
// selections are resident ones (resident.hpp): made where the vector lives, every decision of the
// rule taken there, and left there with their report; above, topk and sidco fetch theirs (one
// synchronization). The buffers (n indices and values, the state, the radix histogram, the ties,
// DGC's sample, sidco-topk's candidates and CUB's temporary storage) form a workspace kept from
// call to call on the device of the last call (grown, never shrunk), so a bucket costs no
// allocation from the pool's driver after its first step, and CUB none per call.
#include <algorithm>
#include <limits>
#include <string>

#include "gs/kernels/select.hpp"
#include "passes.hpp"
#include "resident.hpp"

namespace gs::kernels::portable {

// sidco-topk's summary as a report (its selection is made with host reads: no device decisions).
struct SetReport {
  SelectionReport* dst;
  SelectionReport r;
  GS_HD void operator()(std::uint64_t) const { *dst = r; }
};

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

  Resident select(const float* g, std::uint64_t n, const SelectRequest& r) override {
    auto call = b_.call(g);
    P& p = call.prims();
    const std::uint64_t k = request_k(r, n);
    if (r.rule == SelectRequest::Rule::sidco_topk) {
      const TopkSample t = topk_sample(n);
      ws_.reserve(p, call.device(), n, t.whole ? 0 : t.m, topk_candidate_room(n, k), t.runs);
    } else {
      ws_.reserve(p, call.device(), n, r.rule == SelectRequest::Rule::dgc ? dgc_sample_size(n) : 0);
    }
    p.use_scratch(&ws_.scratch);
    last_ = {};
    select_resident(p, ws_, g, n, r);
    // What fetch() stages in one go: twice the target, or everything for a selection above a
    // threshold (whose count no target bounds).
    fetch_most_ = r.rule == SelectRequest::Rule::above ? n : 2 * k;
    last_ = {ws_.idx.data(), ws_.val.data(), 0, &ws_.state.data()->report};
    return last_;
  }
  SelectionReport fetch(Selection<std::int32_t>& out) override {
    if (!last_.report) throw gs::Error("Selector::fetch: no selection to fetch (call select() first)");
    auto call = b_.call(last_.indices);
    const SelectionReport r = fetch_selection(call.prims(), ws_, fetch_most_, out);
    if (r.failure == SelectionFailure::fit)
      throw gs::Error(
          "SIDCo: stage 1's fit has no valid parameters on these values (too few distinct non-zero "
          "values); a compressor sends the vector's top-k instead");
    if (r.failure == SelectionFailure::sample) throw gs::Error("DGC: the random sample holds no finite value");
    last_.count = r.count;
    return r;
  }

  void above(const float* g, std::uint64_t n, double threshold, Selection<std::int32_t>& out) override {
    SelectRequest r;
    r.threshold = threshold;
    select(g, n, r);
    fetch(out);
  }
  void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) override {
    SelectRequest r;
    r.rule = SelectRequest::Rule::topk;
    r.k = k;
    select(g, n, r);
    fetch(out);
  }
  SidcoSelectResult sidco(const float* g, std::uint64_t n, double density, fitting::SidcoVariant variant, int stages,
                          fitting::SidcoRule rule, Selection<std::int32_t>& out) override {
    SelectRequest req;
    req.rule = SelectRequest::Rule::sidco;
    req.density = density;
    req.variant = variant;
    req.stages = stages;
    req.sidco = rule;
    select(g, n, req);
    const SelectionReport rep = fetch(out);
    SidcoSelectResult r;
    r.threshold = rep.threshold;
    r.stages = rep.stages;
    r.selected = rep.count;
    r.route = SidcoRoute::full_passes;
    r.full_reads = sidco_resident_reads(rep, rule.correct);
    r.nonfinite = rep.nonfinite;
    r.corrected = rep.corrected != 0;
    return r;
  }
  SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                               Selection<std::int32_t>& out) override {
    check_index_range<std::int32_t>(n, "selection");
    SidcoSelectResult r;
    {
      auto call = b_.call(g);
      P& p = call.prims();
      ws_.reserve(p, call.device(), n, 0);  // the candidates in ws_.idx
      p.use_scratch(&ws_.scratch);
      fitting::SidcoTopkBound plan(n, density, stages);
      auto sel = portable::sidco_topk<P, std::int32_t>(p, g, n, density, stages, plan, &ws_.idx);
      out.indices = p.download(sel.indices.data(), sel.count);
      out.values = p.download(sel.values.data(), sel.count);
      topk_idx_ = std::move(sel.indices);  // the selection lives on in these two
      topk_val_ = std::move(sel.values);
      r = topk_result(sel);
      r.nonfinite = n - portable::count_above(p, g, n, -1.0);  // no pass of its own counts them
      SelectionReport rep;
      rep.count = r.selected;
      rep.nonfinite = r.nonfinite;
      rep.threshold = r.threshold;
      rep.stages = r.stages;
      rep.exact = 1;
      p.for_each(1, SetReport{&ws_.state.data()->report, rep});
      last_ = {topk_idx_.data(), topk_val_.data(), r.selected, &ws_.state.data()->report};
    }
    return r;
  }
  Resident resident_selection() const override { return last_; }

 private:
  B b_;
  BackendKind kind_;
  Buffer<P, float> staged_;
  ResidentWorkspace<P> ws_;
  Buffer<P, std::int32_t> topk_idx_;
  Buffer<P, float> topk_val_;
  std::uint64_t fetch_most_ = 0;
  Resident last_;
};

}  // namespace gs::kernels::portable
