// Compressors that estimate a magnitude threshold and send everything above it: SIDCo-E/-P/-GP
// (with the adaptive stage controller shared by all tensors of the model), DGC, RedSync and
// GaussianKSGD. The threshold rules live in fitting/ (gs/fitting/thresholds.hpp) and read the data
// through a kernels backend; compaction and exact top-k come from kernels' CPU entry points.
#include <algorithm>
#include <cmath>
#include <optional>

#include "compressors.hpp"
#include "gs/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cpu.hpp"

namespace gs::compress::detail {

Payload select_above(std::span<const float> acc, double threshold) {
  auto sel = kernels::cpu::select_above(acc, threshold);
  Payload p;
  p.n = acc.size();
  p.indices = std::move(sel.indices);
  p.values = std::move(sel.values);
  return p;
}

Payload select_topk(std::span<const float> acc, std::uint64_t k) {
  const std::uint64_t finite = acc.size() - count_nonfinite(acc);
  k = std::min(k, finite);
  Payload p;
  p.n = acc.size();
  p.indices.resize(k);
  p.values.resize(k);
  if (k > 0) kernels::cpu::topk(acc, k, p.indices, p.values);
  return p;
}

namespace {

// The fitting/ rule's name, and SIDCo's variant, of each method.
struct MethodRule {
  std::string_view name;
  std::optional<SidcoVariant> variant;
};
MethodRule rule_of(ThresholdMethod m) {
  switch (m) {
    case ThresholdMethod::sidco_e: return {"sidco-e", SidcoVariant::exponential};
    case ThresholdMethod::sidco_p: return {"sidco-p", SidcoVariant::pareto};
    case ThresholdMethod::sidco_gp: return {"sidco-gp", SidcoVariant::gamma_pareto};
    case ThresholdMethod::dgc: return {"dgc", std::nullopt};
    case ThresholdMethod::redsync: return {"redsync", std::nullopt};
    case ThresholdMethod::gaussianksgd: return {"gaussianksgd", std::nullopt};
    case ThresholdMethod::sidco_topk: return {"sidco-topk", std::nullopt};
  }
  throw Error("threshold compressor: unknown method");
}

class ThresholdCompressor final : public Compressor {
 public:
  ThresholdCompressor(ThresholdMethod method, double density, const CompressorOptions& o)
      : Compressor(density),
        method_(method),
        name_(rule_of(method).name),
        variant_(rule_of(method).variant),
        seed_(o.seed),
        backend_(kernels::resolve_backend(o.backend)),
        fixed_stages_(o.stages) {
    if (variant_ && fixed_stages_ == 0 && density < 1.0) controller_.emplace(density, 1);
  }

  std::string_view name() const override { return name_; }

  // The adaptive controller aims at the new density: each step's achieved density is judged
  // against the target of that step, and the stage count carries over (clamped to what the new
  // density allows).
  void set_density(double density) override {
    Compressor::set_density(density);
    if (!variant_ || fixed_stages_ != 0) return;
    if (density >= 1.0) controller_.reset();
    else if (controller_) controller_->retarget(density);
    else controller_.emplace(density, 1);
  }

  Compressed compress(std::span<const float> acc, std::string_view /*tensor*/) override {
    Compressed c;
    c.info.n = acc.size();
    c.info.target_density = density();
    if (density() >= 1.0) {  // keep everything finite: no estimate needed
      c.payload = select_above(acc, -1.0);
    } else if (!acc.empty()) {
      const std::uint64_t k = target_count(acc.size(), density());
      std::optional<ThresholdResult> r;
      const int stages = variant_ ? (controller_ ? controller_->stages() : fixed_stages_) : 0;
      try {
        if (method_ == ThresholdMethod::sidco_topk && backend_ == kernels::BackendKind::cpu) {
          // Exact top-k with a SIDCo bound: about one read of acc, the bound from a sample.
          kernels::cpu::Selection<std::int32_t> sel;
          const auto s = kernels::cpu::sidco_topk(acc, density(), topk_stages(), sel, &workspace_);
          c.payload.n = acc.size();
          c.payload.indices = std::move(sel.indices);
          c.payload.values = std::move(sel.values);
          c.info.threshold = s.threshold;
          c.info.stages = s.stages;
          return finish(std::move(c), s.nonfinite);  // the candidates' read counted them
        }
        if (variant_ && backend_ == kernels::BackendKind::cpu) {
          // Threshold and compaction in one pipeline: M + 1 reads of acc, not M + 2.
          kernels::cpu::Selection<std::int32_t> sel;
          const auto s = kernels::cpu::sidco_select(acc, density(), *variant_, stages, false, sel,
                                                    kernels::cpu::SidcoRoute::automatic,
                                                    &workspace_);
          c.payload.n = acc.size();
          c.payload.indices = std::move(sel.indices);
          c.payload.values = std::move(sel.values);
          c.info.threshold = s.threshold;
          c.info.stages = s.stages;
          return finish(std::move(c), s.nonfinite);  // stage 1 counted them: no extra read
        }
        auto passes = kernels::make_passes(acc, backend_);
        r = threshold_by_name(name_, *passes, density(),
                              method_ == ThresholdMethod::sidco_topk ? topk_stages() : stages,
                              seed_ + calls_++);
      } catch (const gs::Error&) {
        // Degenerate vector (e.g. fewer finite non-zero values than the fit needs, as in a
        // residual that is all zeros): exact top-k of what is there, which is what any estimate
        // aims at.
        r.reset();
      }
      if (r && ((method_ == ThresholdMethod::dgc && r->stages == 2) ||
                method_ == ThresholdMethod::sidco_topk)) {
        // Exact top-k: sidco-topk's selection, and DGC's hierarchical step when the sampled
        // threshold overshot 4k/3.
        c.payload = select_topk(acc, k);
        c.info.threshold = r->threshold;
        c.info.stages = 0;
      } else if (r) {
        c.payload = select_above(acc, r->threshold);
        c.info.threshold = r->threshold;
        c.info.stages = variant_ ? r->stages : 0;
      } else {
        Payload all = select_above(acc, 0.0);
        c.payload = all.count() <= k ? std::move(all) : select_topk(acc, k);
      }
    }
    return finish(std::move(c), count_nonfinite(acc));
  }

  void end_step() override {
    if (controller_ && step_n_ > 0) controller_->record(double(step_selected_) / double(step_n_));
    step_selected_ = step_n_ = 0;
  }

 private:
  // sidco-topk fits SIDCo-E's stages on its sample to place its bound: a fixed count (the
  // selection is exact whatever the bound, so no controller is needed).
  int topk_stages() const { return fixed_stages_ > 0 ? fixed_stages_ : 2; }

  // Counts what was selected towards the step's achieved density (the stage controller's input);
  // nonfinite: NaN/Inf in the input, from a pass that already read it where there was one.
  Compressed finish(Compressed c, std::uint64_t nonfinite) {
    c.info.nonfinite = nonfinite;
    c.info.selected = c.payload.count();
    step_selected_ += c.info.selected;
    step_n_ += c.info.n;
    return c;
  }

  ThresholdMethod method_;
  std::string_view name_;
  std::optional<SidcoVariant> variant_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  kernels::BackendKind backend_;
  int fixed_stages_;
  std::optional<StageController> controller_;
  kernels::cpu::SidcoWorkspace workspace_;  // reused candidate buffers of the SIDCo pipeline
  std::uint64_t step_selected_ = 0, step_n_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> make_threshold_compressor(ThresholdMethod method, double density,
                                                      const CompressorOptions& o) {
  return std::make_unique<ThresholdCompressor>(method, density, o);
}

}  // namespace gs::compress::detail
