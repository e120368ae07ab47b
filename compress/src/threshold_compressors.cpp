// Compressors that estimate a magnitude threshold and send everything above it: one per row of
// the threshold-method table (gs/fitting/threshold_methods.hpp), e.g. SIDCo-E/-P/-GP (with the
// adaptive stage controller shared by all tensors of the model), DGC, RedSync, GaussianKSGD and
// sidco-topk. The threshold rules live in fitting/ (gs/fitting/thresholds.hpp);
// the passes, compaction and exact top-k run on the backend's kernels::Selector, where the vector
// stays from the estimate to the payload.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "compressors.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/device.hpp"
#include "gs/kernels/select.hpp"

namespace gs::compress::detail {

namespace {

class ThresholdCompressor final : public Compressor {
 public:
  ThresholdCompressor(const fitting::ThresholdMethodInfo& method, double density, const CompressorOptions& o)
      : Compressor(density),
        method_(method),
        seed_(o.seed),
        selector_(o.backend),
        fixed_stages_(o.stages),
        published_(o.sidco_as_published),
        carried_(o.sidco_estimate == "carried") {
    if (o.sidco_estimate != "carried" && o.sidco_estimate != "fit")
      throw Error("--sidco-estimate must be carried or fit, not '" + o.sidco_estimate + "'");
    if (adaptive_stages() && density < 1.0) controller_.emplace(density);
  }

  std::string_view name() const override { return method_.name; }

  // The adaptive controller aims at the new density: each step's achieved density is judged
  // against the target of that step, and the stage count carries over (clamped to what the new
  // density allows).
  void set_density(double density) override {
    // A calibration holds for the density it was learnt at: another starts afresh.
    if (density != this->density()) carry_.clear();
    Compressor::set_density(density);
    if (!adaptive_stages()) return;
    if (density >= 1.0)
      controller_.reset();
    else if (controller_)
      controller_->retarget(density);
    else
      controller_.emplace(density);
  }

  Compressed compress(std::span<const float> acc, std::string_view tensor) override {
    // On the device from here to the payload (CUDA): one upload, only the selection comes back.
    return compress_resident(selector_->place(acc), acc.size(), tensor);
  }
  // SIDCo's stage 1 reads all of acc; on the host the pass that wrote acc can take it.
  std::optional<fitting::StatsFields> stats_on_write() const override {
    if (!staged() || density() >= 1.0 || resident_backend() != kernels::BackendKind::cpu) return std::nullopt;
    return fitting::sidco_first_fields(method_.variant);
  }
  Compressed compress_given(std::span<const float> acc, std::string_view tensor,
                            const fitting::MagnitudeStats& first) override {
    if (!stats_on_write()) return compress(acc, tensor);
    return select_into(selector_->place(acc), acc.size(), tensor, &first);
  }

  std::optional<kernels::BackendKind> resident_backend() const override { return selector_.get().kind(); }
  kernels::Selector::Resident resident_selection() const override { return resident_; }

  Compressed compress_resident(const float* g, std::uint64_t n, std::string_view tensor) override {
    return select_into(g, n, tensor, nullptr);
  }

  kernels::Selector::Resident select_resident(const float* g, std::uint64_t n, std::string_view tensor) override {
    // The stage controller needs each count on the host, the carried estimate each selection's
    // threshold and values: both fetch the selection (the copy the pairs' exchange makes anyway
    // where they go through the host).
    if (n == 0 || controller_ || carries()) {
      compress_resident(g, n, tensor);
      return resident_;
    }
    double threshold = 0.0;
    resident_ = selector_->select(g, n, request(g, n, threshold, tensor));
    return resident_;
  }

  // The selection of n floats at g in the backend's memory, as its payload; first: stage 1's
  // statistics of g taken as it was written (stats_on_write), or null.
  Compressed select_into(const float* g, std::uint64_t n, std::string_view tensor,
                         const fitting::MagnitudeStats* first) {
    Compressed c;
    c.info.n = n;
    c.info.target_density = density();
    kernels::Selection<std::int32_t> sel;
    if (n > 0) {
      double threshold = std::numeric_limits<double>::quiet_NaN();
      kernels::SelectRequest req = request(g, n, threshold, tensor);
      if (req.rule == kernels::SelectRequest::Rule::sidco) req.first = first;
      selector_->select(g, n, req);
      const kernels::SelectionReport r = selector_->fetch(sel);
      if (carries()) learn(tensor, n, req.sidco.scale, r, sel);
      c.info = info_from(r, n, density());
      // The stage count is SIDCo's (sidco-topk's: those it fitted on its sample).
      if (!staged() && !topk_bounded()) c.info.stages = 0;
      if (density() >= 1.0) c.info.threshold = std::numeric_limits<double>::quiet_NaN();
      if (!std::isnan(threshold)) c.info.threshold = threshold;  // a host rule's
      return finish(std::move(c), std::move(sel), r.nonfinite);
    }
    return finish(std::move(c), std::move(sel), 0);
  }

  void end_step() override {
    if (controller_ && step_n_ > 0) controller_->record(double(step_selected_) / double(step_n_));
    step_selected_ = step_n_ = 0;
  }

  void save_state(StateWriter& w) const override {
    Compressor::save_state(w);
    w.put(calls_);
    w.put<std::uint8_t>(controller_.has_value());
    if (controller_) controller_->save_state(w);
    w.put<std::uint64_t>(carry_.size());
    for (const auto& [name, c] : carry_) {
      w.put_text(name);
      w.put(c.n);
      w.put(c.scale);
    }
  }

  void load_state(StateReader& r) override {
    Compressor::load_state(r);  // re-aims or drops the controller as set_density() does
    calls_ = r.get<std::uint64_t>();
    const bool had = r.get<std::uint8_t>() != 0;
    if (had && !controller_ && staged())
      r.fail(
          "it was saved by SIDCo as published (its adaptive stage controller): resume with "
          "--sidco-as-published (Python: sidco_as_published=True), as it was made");
    r.expect(had, controller_.has_value(), "the adaptive stage controller");
    if (controller_) controller_->load_state(r);
    carry_.clear();
    if (r.before_estimates) return;  // a state from before the carried estimate: it starts afresh
    for (auto count = r.get<std::uint64_t>(); count > 0; --count) {
      std::string name = r.get_text();
      Carry c;
      c.n = r.get<std::uint64_t>();
      c.scale = r.get<double>();
      if (!(c.scale > 0.0 && std::isfinite(c.scale)))
        r.fail("has a carried SIDCo threshold scale that is not positive");
      if (!carries()) r.fail("carries SIDCo thresholds for a compressor that does not carry them");
      carry_.emplace(std::move(name), c);
    }
  }

 private:
  // SIDCo's stages: the adaptive controller or the caller's fixed count.
  bool staged() const { return method_.kind == fitting::ThresholdKind::sidco; }
  bool topk_bounded() const { return method_.kind == fitting::ThresholdKind::sidco_topk; }
  // sidco-topk fits SIDCo-E's stages on its sample to place its bound: a fixed count (the
  // selection is exact whatever the bound, so no controller is needed).
  int topk_stages() const { return fixed_stages_ > 0 ? fixed_stages_ : 2; }
  // SIDCo as published adapts its stage count (the reference's controller, which the momentum
  // correction's accumulator makes cycle); otherwise the stage count stays (--stages, or
  // default_sidco_stages) and the count correction holds each call's selection to its target
  // (docs/algorithms.md, "SIDCo's controller in training").
  bool adaptive_stages() const { return staged() && fixed_stages_ == 0 && published_; }
  fitting::SidcoRule rule() const { return published_ ? fitting::SidcoRule::published() : fitting::SidcoRule{}; }
  // Whether SIDCo's threshold is the fit calibrated by the last count of the same tensor
  // (--sidco-estimate carried, not as published).
  bool carries() const { return staged() && carried_ && !published_; }

  // The carried estimate (docs/algorithms.md, "SIDCo's estimate on the momentum-corrected
  // accumulator"): from one selection, the factor that would have placed the stages' threshold
  // on the target count, for the next call on the same tensor. The threshold that gives k is
  // read off the final selection (its threshold t and count m, after any correction): t + b ln(m/k),
  // b the mean excess of its values over t (the exponential slope of the selection's own tail;
  // m = k for an exact top-k). A vector whose stages placed no threshold teaches nothing.
  void learn(std::string_view tensor, std::uint64_t n, double scale, const kernels::SelectionReport& r,
             const kernels::Selection<std::int32_t>& sel) {
    const double fitted = r.estimate / scale;  // the stages' own threshold
    const std::uint64_t m = sel.values.size();
    if (!(fitted > 0.0 && std::isfinite(fitted)) || !(r.threshold > 0.0) || m == 0) return;
    const double k = double(fitting::target_count(n, density()));
    double excess = 0.0;
    for (float v : sel.values) excess += std::fabs(double(v));
    excess = excess / double(m) - r.threshold;
    double aimed = r.threshold + std::max(excess, 0.0) * std::log(double(m) / k);
    if (!(aimed > 0.0 && std::isfinite(aimed))) aimed = r.threshold;
    auto it = carry_.find(tensor);
    if (it == carry_.end()) it = carry_.emplace(std::string(tensor), Carry{}).first;
    it->second = {n, aimed / fitted};
  }
  // The factor for this call: the tensor's carried one, when learnt on a vector of its size.
  double carried_scale(std::string_view tensor, std::uint64_t n) const {
    if (!carries()) return 1.0;
    const auto it = carry_.find(tensor);
    return it != carry_.end() && it->second.n == n ? it->second.scale : 1.0;
  }

  // What to select: SIDCo's, sidco-topk's and DGC's rules run where the vector lives (their
  // decisions on the device), exact top-k of what is there where a rule has no threshold (a
  // degenerate vector); the other estimates (RedSync, GaussianKSGD) place their threshold on the
  // host from passes, and `threshold` receives it.
  kernels::SelectRequest request(const float* g, std::uint64_t n, double& threshold, std::string_view tensor) {
    kernels::SelectRequest r;
    r.k = fitting::target_count(n, density());
    r.density = density();
    r.fallback = true;
    if (density() >= 1.0) return r;  // keep everything finite: no estimate needed
    if (staged()) {
      r.rule = kernels::SelectRequest::Rule::sidco;
      r.variant = method_.variant;
      r.stages = controller_     ? controller_->stages()
                 : fixed_stages_ ? fixed_stages_
                                 : fitting::default_sidco_stages(density());
      r.sidco = rule();
      r.sidco.scale = carried_scale(tensor, n);
      return r;
    }
    if (topk_bounded()) {
      r.rule = kernels::SelectRequest::Rule::sidco_topk;
      r.stages = topk_stages();
      return r;
    }
    if (method_.name == std::string_view("dgc")) {
      r.rule = kernels::SelectRequest::Rule::dgc;
      r.seed = seed_ + calls_++;
      return r;
    }
    try {
      const fitting::ThresholdResult t =
          method_.rule(*selector_->passes(g, n), density(), {0, seed_ + calls_++, false});
      threshold = t.threshold;
      r.rule = t.exact ? kernels::SelectRequest::Rule::topk : kernels::SelectRequest::Rule::above;
      // What the threshold selects, as the rule counted it (at or above it: selection_bound).
      r.threshold = t.exact ? t.threshold : fitting::selection_bound(t.threshold);
    } catch (const kernels::DeviceError&) {
      throw;  // the device failed (out of memory, a launch): not the vector; never another method
    } catch (const gs::Error&) {
      r.rule = kernels::SelectRequest::Rule::top_nonzero;  // a degenerate vector: exact top-k of what is there
    }
    return r;
  }

  // The payload of the selection; counts what was selected towards the step's achieved density
  // (the stage controller's input). nonfinite: NaN/Inf in the input.
  Compressed finish(Compressed c, kernels::Selection<std::int32_t>&& sel, std::uint64_t nonfinite) {
    // The backend's last selection is the one sent (the CPU's lives in the payload only).
    resident_ = selector_->kind() == kernels::BackendKind::cpu || c.info.n == 0 ? kernels::Selector::Resident{}
                                                                                : selector_->resident_selection();
    c.payload.n = c.info.n;
    c.payload.indices = std::move(sel.indices);
    c.payload.values = std::move(sel.values);
    c.info.nonfinite = nonfinite;
    c.info.selected = c.payload.count();
    step_selected_ += c.info.selected;
    step_n_ += c.info.n;
    return c;
  }

  const fitting::ThresholdMethodInfo& method_;  // its row of threshold_methods()
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  mutable SelectorOnUse selector_;  // the backend's selection, made at its first use; keeps its buffers
  int fixed_stages_;
  bool published_;  // SIDCo as published: its stage controller, no count correction
  bool carried_;    // --sidco-estimate carried
  struct Carry {
    std::uint64_t n = 0;  // the tensor's size when it was learnt
    double scale = 1.0;
  };
  std::map<std::string, Carry, std::less<>> carry_;  // per tensor (carries())
  std::optional<fitting::StageController> controller_;
  std::uint64_t step_selected_ = 0, step_n_ = 0;
  kernels::Selector::Resident resident_;  // where the last selection lives (resident backends)
};

}  // namespace

std::unique_ptr<Compressor> make_threshold_compressor(const fitting::ThresholdMethodInfo& method, double density,
                                                      const CompressorOptions& o) {
  if (method.kind == fitting::ThresholdKind::exact) return make_topk(density, o);
  return std::make_unique<ThresholdCompressor>(method, density, o);
}

}  // namespace gs::compress::detail
