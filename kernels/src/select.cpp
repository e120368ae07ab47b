// Selector: the CPU backend's, the shared default of SIDCo's selection, and the choice of backend.
#include "gs/kernels/select.hpp"

#include <algorithm>

#include "gs/error.hpp"
#include "gs/kernels/cpu.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/vector_ops.hpp"
#if defined(GS_HAVE_CUDA)
#include "gs/kernels/cuda.hpp"
#endif

namespace gs::kernels {

SidcoSelectResult Selector::sidco(const float* g, std::uint64_t n, double density,
                                  fitting::SidcoVariant variant, int stages, Selection<std::int32_t>& out) {
  const fitting::ThresholdResult t = fitting::sidco_estimate(*passes(g, n), density, variant, stages);
  above(g, n, t.threshold, out);
  SidcoSelectResult r;
  r.threshold = t.threshold;
  r.stages = t.stages;
  r.selected = out.indices.size();
  r.route = SidcoRoute::full_passes;
  r.full_reads = t.stages + 1;
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
                          int stages, Selection<std::int32_t>& out) override {
    return cpu::sidco_select(span(g, n), density, variant, stages, false, out,
                             SidcoRoute::automatic, &workspace_);
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
