// Selector: the CPU backend's, the shared default of SIDCo's selection, and the choice of backend.
#include "gs/kernels/select.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "gs/base/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/vector_ops.hpp"
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::kernels {

namespace {

float min_magnitude(const std::vector<float>& v) {
  float m = std::numeric_limits<float>::max();
  for (float x : v) m = std::min(m, std::fabs(x));
  return v.empty() ? 0.0f : m;
}

}  // namespace

Selector::Resident Selector::resident_selection() const {
  throw Error("the " + std::string(to_string(kind())) +
              " backend keeps no selection of its own: read "
              "the one it returned");
}

namespace {

class CpuSelector final : public Selector {
 public:
  BackendKind kind() const override { return BackendKind::cpu; }
  const float* place(std::span<const float> host) override { return host.data(); }
  std::unique_ptr<fitting::MagnitudePasses> passes(const float* g, std::uint64_t n) override {
    return std::make_unique<cpu::CpuPasses>(span(g, n));
  }
  std::uint64_t nonfinite(const float* g, std::uint64_t n) override { return n - cpu::count_above(span(g, n), -1.0); }
  void above(const float* g, std::uint64_t n, double threshold, Selection<std::int32_t>& out) override {
    out = cpu::select_above(span(g, n), threshold);
  }
  void topk(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) override {
    k = std::min(k, n - nonfinite(g, n));
    out.indices.resize(k);
    out.values.resize(k);
    if (k > 0) cpu::topk(span(g, n), k, std::span(out.indices), std::span(out.values));
  }
  SidcoSelectResult sidco_topk(const float* g, std::uint64_t n, double density, int stages,
                               Selection<std::int32_t>& out) override {
    return cpu::sidco_topk(span(g, n), density, stages, out, &workspace_);
  }
  SidcoSelectResult sidco(const float* g, std::uint64_t n, double density, fitting::SidcoVariant variant, int stages,
                          fitting::SidcoRule rule, Selection<std::int32_t>& out) override {
    return cpu::sidco_select(span(g, n), density, variant, stages, rule, out, SidcoRoute::automatic, &workspace_);
  }
  // On the host: the selection in this selector's own buffers until fetch() moves it out.
  Resident select(const float* g, std::uint64_t n, const SelectRequest& r) override {
    sel_ = {};
    report_ = run(g, n, r, sel_);
    report_.count = sel_.indices.size();
    return {sel_.indices.data(), sel_.values.data(), report_.count, &report_};
  }
  SelectionReport fetch(Selection<std::int32_t>& out) override {
    out = std::move(sel_);
    sel_ = {};
    return report_;
  }

 private:
  static std::span<const float> span(const float* g, std::uint64_t n) { return {g, n}; }
  SelectionReport run(const float* g, std::uint64_t n, const SelectRequest& r, Selection<std::int32_t>& out);
  // What a compressor sends where the rule places no threshold: the min(k, non-zero) largest.
  void fall_back(const float* g, std::uint64_t n, std::uint64_t k, Selection<std::int32_t>& out) {
    above(g, n, 0.0, out);
    if (out.indices.size() > k) topk(g, n, k, out);
  }
  cpu::SidcoWorkspace workspace_;  // candidate buffers reused between calls
  Selection<std::int32_t> sel_;
  SelectionReport report_;
};

SelectionReport CpuSelector::run(const float* g, std::uint64_t n, const SelectRequest& r,
                                 Selection<std::int32_t>& out) {
  SelectionReport rep;
  const bool given_k = r.rule == SelectRequest::Rule::topk || r.rule == SelectRequest::Rule::top_nonzero;
  const std::uint64_t k = given_k || n == 0 ? r.k : fitting::target_count(n, r.density);
  switch (r.rule) {
    case SelectRequest::Rule::top_nonzero:
      fall_back(g, n, k, out);
      rep.threshold = std::numeric_limits<double>::quiet_NaN();
      break;
    case SelectRequest::Rule::above:
      above(g, n, r.threshold, out);
      break;
    case SelectRequest::Rule::topk:
      topk(g, n, k, out);
      rep.exact = 1;
      rep.threshold = min_magnitude(out.values);
      break;
    case SelectRequest::Rule::sidco: {
      std::optional<SidcoSelectResult> s;
      try {
        s = cpu::sidco_select(span(g, n), r.density, r.variant, r.stages, r.sidco, out, SidcoRoute::automatic,
                              &workspace_, r.first);
      } catch (const gs::Error&) {
        if (!r.fallback) throw;  // a fit without valid parameters
      }
      rep.threshold = std::numeric_limits<double>::quiet_NaN();
      if (s) {
        rep.threshold = s->threshold;
        rep.stages = s->stages;
        rep.corrected = s->corrected;
        rep.exact = s->exact;
        rep.estimate = s->estimate;
        rep.estimate_count = s->estimate_selected;
        rep.nonfinite = s->nonfinite;  // counted by its first read
      }
      if (r.fallback && (!s || out.indices.empty())) fall_back(g, n, k, out);
      if (s) return rep;
      break;
    }
    case SelectRequest::Rule::sidco_topk: {
      const SidcoSelectResult s = sidco_topk(g, n, r.density, r.stages, out);
      rep.threshold = s.threshold;
      rep.stages = s.stages;
      rep.exact = 1;
      rep.corrected = s.full_reads > 1;  // the bound fell short: more reads
      rep.nonfinite = s.nonfinite;       // counted by its own pass
      return rep;
    }
    case SelectRequest::Rule::dgc: {
      std::optional<fitting::ThresholdResult> t;
      try {
        t = fitting::dgc_threshold(*passes(g, n), r.density, r.seed);
      } catch (const gs::Error&) {
        if (!r.fallback) throw;  // a sample without a finite value
      }
      if (t && t->exact)
        topk(g, n, k, out);
      else if (t)
        above(g, n, fitting::selection_bound(t->threshold), out);  // at or above it
      else
        fall_back(g, n, k, out);
      rep.threshold = std::numeric_limits<double>::quiet_NaN();
      if (t) {
        rep.threshold = t->threshold;
        rep.stages = t->stages;
        rep.exact = t->exact;
      }
      break;
    }
  }
  rep.nonfinite = nonfinite(g, n);
  return rep;
}

}  // namespace

std::unique_ptr<VectorOps> make_vector_ops(BackendKind kind, int device) {
  switch (kind) {
    case BackendKind::cpu:
      break;
    case BackendKind::cuda_host:
      return cuda_host::make_vector_ops(device);
    case BackendKind::cuda:
#if defined(GS_HAVE_CUDA)
      resolve_backend("cuda", device);  // throws, saying why, without a usable GPU (asks that device only)
      return cuda::make_vector_ops(device);
#else
      resolve_backend("cuda");
      break;
#endif
  }
  throw Error("make_vector_ops: the " + std::string(to_string(kind)) +
              " backend keeps its vectors in host memory: there is no device to work on");
}

std::unique_ptr<Selector> make_selector(BackendKind kind, void* stream) {
  switch (kind) {
    case BackendKind::cpu:
      return std::make_unique<CpuSelector>();
    case BackendKind::cuda_host:
      return cuda_host::make_selector();
    case BackendKind::cuda:
#if defined(GS_HAVE_CUDA)
      resolve_backend("cuda");  // throws, saying why, without a usable GPU
      return cuda::make_selector(static_cast<cudaStream_t>(stream));
#else
      (void)stream;
      resolve_backend("cuda");  // throws: this build has no CUDA backend
      break;
#endif
  }
  throw Error("make_selector: unknown backend");
}

}  // namespace gs::kernels
