// Selector: the CPU backend's, the shared default of SIDCo's selection, and the choice of backend.
#include "gs/kernels/select.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gs/error.hpp"
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

SidcoSelectResult Selector::sidco(const float* g, std::uint64_t n, double density,
                                  fitting::SidcoVariant variant, int stages, fitting::SidcoRule rule,
                                  Selection<std::int32_t>& out) {
  const auto passes = this->passes(g, n);
  fitting::SidcoStages plan(n, density, variant, stages, rule.recount);
  bool more = plan.first(passes->stats_light(plan.first_fields()));
  while (more)
    more = plan.tail(passes->stats_above_light(plan.threshold(), plan.threshold(), plan.tail_fields()));
  SidcoSelectResult r;
  r.threshold = plan.threshold();
  r.full_reads = plan.stages_run() + 1;
  const std::uint64_t k = plan.target();
  bool exact = false;  // the selection is to be g's exact top-k
  if (rule.correct) {
    // Counted first, so that the selection is made (and comes to the host) once: at the stages'
    // threshold inside the band, at the corrected one below it, g's exact top-k above it.
    const std::uint64_t count = passes->count_above(r.threshold);
    ++r.full_reads;
    if (plan.needs_correction(count, rule.band)) {
      r.corrected = true;
      if (count > k) exact = true;
      else r.threshold = plan.corrected({r.threshold, count, 0.0}, rule.band);
    }
  }
  if (!exact) above(g, n, r.threshold, out);
  if (exact || (r.corrected && out.indices.size() > k && plan.needs_correction(out.indices.size(), rule.band))) {
    topk(g, n, k, out);  // where the selection lives, so that resident_selection() is it
    r.threshold = std::nextafter(double(min_magnitude(out.values)), 0.0);
  }
  r.stages = plan.stages_run();
  r.selected = out.indices.size();
  r.route = SidcoRoute::full_passes;
  r.nonfinite = nonfinite(g, n);
  return r;
}

Selector::Resident Selector::resident_selection() const {
  throw Error("the " + std::string(to_string(kind())) + " backend keeps no selection of its own: read "
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
  std::uint64_t nonfinite(const float* g, std::uint64_t n) override {
    return n - cpu::count_above(span(g, n), -1.0);
  }
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
  SidcoSelectResult sidco(const float* g, std::uint64_t n, double density, fitting::SidcoVariant variant,
                          int stages, fitting::SidcoRule rule, Selection<std::int32_t>& out) override {
    return cpu::sidco_select(span(g, n), density, variant, stages, rule, out, SidcoRoute::automatic, &workspace_);
  }

 private:
  static std::span<const float> span(const float* g, std::uint64_t n) { return {g, n}; }
  cpu::SidcoWorkspace workspace_;  // candidate buffers reused between calls
};

}  // namespace

std::unique_ptr<VectorOps> make_vector_ops(BackendKind kind, int device) {
  switch (kind) {
    case BackendKind::cpu: break;
    case BackendKind::cuda_host: return cuda_host::make_vector_ops(device);
    case BackendKind::cuda:
#if defined(GS_HAVE_CUDA)
      resolve_backend("cuda");  // throws, saying why, without a usable GPU
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
    case BackendKind::cpu: return std::make_unique<CpuSelector>();
    case BackendKind::cuda_host: return cuda_host::make_selector();
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
