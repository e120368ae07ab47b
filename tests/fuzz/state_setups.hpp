#pragma once
// The compressors whose checkpointed state fuzz_state loads, and how they are driven: a DDP hook
// core (BucketCompressor) or a `gradscope train` core (ModelCompressor) of a small model, with the
// windows a state carries (SIDCo's stage controller, Accordion's interval, a warm-up, momentum
// correction's velocities). make_seeds.cpp saves each after enough steps to be past every window,
// so the seeds are states as a long run checkpoints them.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/collectives.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/step_rules.hpp"

namespace gs::fuzz {

struct StateSetup {
  const char* method;
  double momentum;      // momentum correction (0: off)
  bool accordion;       // Accordion's density schedule, checks every 5 steps
  std::int64_t warmup;  // dense warm-up steps
  bool model;           // a ModelCompressor (gradscope train's) instead of a BucketCompressor
};

inline const std::vector<StateSetup>& state_setups() {
  static const std::vector<StateSetup> v = {
      {"sidco-e", 0.9, true, 3, false}, {"sidco-gp", 0.0, false, 0, false}, {"topk", 0.0, true, 0, false},
      {"dgc", 0.9, false, 2, false},    {"randomk", 0.0, false, 0, false},  {"qsgd-mn", 0.0, false, 0, false},
      {"sidco-e", 0.9, false, 0, true}, {"topk", 0.0, false, 0, true},
  };
  return v;
}

inline std::vector<float> state_grad(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(50.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = (rng() & 1 ? 1.0f : -1.0f) * e(rng);
  return g;
}

// Either core, made as the setup says and driven one step at a time on one worker.
class StateSubject {
 public:
  explicit StateSubject(const StateSetup& s) {
    const double density = compress::density_based(s.method) ? 0.01 : 1.0;
    auto c = compress::make_compressor(s.method, density);
    if (s.model) {
      model_ = std::make_unique<compress::ModelCompressor>(
          std::vector<compress::TensorSpec>{{"a", 300}, {"b", 200}, {"c", 100}}, compress::Granularity::layer, 0,
          std::move(c));
      if (s.momentum > 0) model_->set_momentum_correction(s.momentum);
      return;
    }
    compress::WarmupSchedule w;
    w.steps = s.warmup;
    bucket_ = std::make_unique<compress::BucketCompressor>(std::move(c), w);
    if (s.accordion) {
      compress::DensitySchedule d;
      d.kind = compress::DensitySchedule::Kind::accordion;
      d.interval = 5;
      bucket_->set_density_schedule(d, {"kind", "high", "interval", "eta", "density"});
    }
    if (s.momentum > 0) bucket_->set_momentum_correction(s.momentum, "momentum");
  }

  void step(std::uint64_t seed) {
    compress::SoloCollectives solo;
    if (model_) {
      const auto g = state_grad(model_->numel(), seed);
      std::vector<float> out(g.size());
      model_->step(g, solo, out);
      return;
    }
    const compress::BucketParam first[] = {{1, 300}, {2, 200}}, second[] = {{3, 100}};
    const auto g0 = state_grad(500, seed), g1 = state_grad(100, seed + 1);
    std::vector<float> o0(500), o1(100);
    bucket_->exchange(0, g0, first, solo, o0, false);
    bucket_->exchange(1, g1, second, solo, o1, true);
  }

  std::string save() const {
    StateWriter w;
    if (model_)
      model_->save_state(w);
    else
      bucket_->save_state(w);
    return w.take();
  }
  void load(StateReader& r) {
    if (model_)
      model_->load_state(r);
    else
      bucket_->load_state(r);
  }

 private:
  std::unique_ptr<compress::ModelCompressor> model_;
  std::unique_ptr<compress::BucketCompressor> bucket_;
};

}  // namespace gs::fuzz
