// Variance-based sparsification (Tsuzuku, Imachi and Akiba, 2018; algorithms.md section 6).
//
// Per vector the compressor keeps v, the accumulated variance of the mini-batch mean gradient
// (sum over the batch of squared per-sample gradients / B^2, handed in once per step through
// add_gradient_variance). The residual memory keeps r: the acc given to compress() is r + g. An
// element is sent when its accumulated gradient stands out of the noise it accumulated with:
//   acc_i^2 > alpha * v_i  ->  send acc_i (exactly, as float32), v_i = 0   (the residual zeroes r_i)
//   otherwise              ->  v_i *= zeta                                   (r_i waits)
// The density asked for plays no part in the selection; CompressInfo::target_density reports it
// as a nominal reference, so quality() = achieved / asked says how far the variance rule lands
// from it.
// The paper also quantizes the sent values; that is not reproduced: values travel as float32, which
// keeps the residual invariant exact.
#include <cmath>
#include <map>
#include <string>

#include "compressors.hpp"
#include "gs/base/error.hpp"

namespace gs::compress::detail {
namespace {

class VarianceCompressor final : public Compressor {
 public:
  VarianceCompressor(double density, double alpha, double zeta) : Compressor(density), alpha_(alpha), zeta_(zeta) {}

  std::string_view name() const override { return "variance"; }
  bool needs_gradient_variance() const override { return true; }

  void add_gradient_variance(std::string_view tensor, std::span<const float> v) override {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]) || v[i] < 0.0f)
        throw Error("variance compressor: the gradient variance of '" + std::string(tensor) + "' has " +
                    (std::isfinite(v[i]) ? "a negative" : "a non-finite") + " element at " + std::to_string(i) +
                    ": it must be a sum of squares (check the per-sample gradients)");
    auto it = state_.find(tensor);
    if (it == state_.end()) it = state_.emplace(std::string(tensor), State{std::vector<float>(v.size(), 0.0f)}).first;
    State& s = it->second;
    if (s.v.size() != v.size())
      throw Error("variance compressor: '" + std::string(tensor) + "' had " + std::to_string(s.v.size()) +
                  " elements and now " + std::to_string(v.size()) + ": a vector must keep its size between steps");
    if (s.fresh)
      throw Error("variance compressor: the gradient variance of '" + std::string(tensor) +
                  "' was given twice for one step: give it once before each compress()");
    for (std::size_t i = 0; i < v.size(); ++i) s.v[i] += v[i];
    s.fresh = true;
  }

  Compressed compress(std::span<const float> acc, std::string_view tensor) override {
    const auto it = state_.find(tensor);
    if (it == state_.end() || !it->second.fresh)
      throw Error("variance compressor: no gradient variance for '" + std::string(tensor) +
                  "' this step: give it (add_gradient_variance, or ModelCompressor::"
                  "set_gradient_variance) before each compress()");
    State& s = it->second;
    if (s.v.size() != acc.size())
      throw Error("variance compressor: '" + std::string(tensor) + "' has " + std::to_string(acc.size()) +
                  " elements but its gradient variance " + std::to_string(s.v.size()) +
                  ": a vector must keep its size between steps");
    for (std::size_t i = 0; i < acc.size(); ++i)
      if (!std::isfinite(acc[i]))
        throw Error("variance compressor: '" + std::string(tensor) + "' holds NaN or Inf (element " +
                    std::to_string(i) + "): skip the step or lower the learning rate");
    s.fresh = false;

    Compressed c;
    c.payload.n = acc.size();
    c.info.n = acc.size();
    c.info.target_density = density();  // nominal: it does not steer the selection
    for (std::size_t i = 0; i < acc.size(); ++i) {
      // In double: acc_i^2 cannot overflow and ties at 0 == 0 stay unsent.
      const double a = acc[i];
      if (a * a > alpha_ * double(s.v[i])) {
        c.payload.indices.push_back(std::int32_t(i));
        c.payload.values.push_back(acc[i]);
        s.v[i] = 0.0f;
      } else {
        s.v[i] = float(double(s.v[i]) * zeta_);
      }
    }
    c.info.selected = c.payload.count();
    return c;
  }

  // The per-tensor variance sums, by name (between steps none is fresh).
  void save_state(StateWriter& w) const override {
    Compressor::save_state(w);
    w.put<std::uint64_t>(state_.size());
    for (const auto& [name, s] : state_) {
      w.put_text(name);
      w.put_array<float>(s.v);
    }
  }
  void load_state(StateReader& r) override {
    Compressor::load_state(r);
    state_.clear();
    for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
      std::string name = r.get_text();
      state_[std::move(name)] = State{r.get_array<float>()};
    }
  }

 private:
  struct State {
    std::vector<float> v;
    bool fresh = false;  // a variance arrived since the last compress()
  };
  double alpha_, zeta_;
  std::map<std::string, State, std::less<>> state_;
};

}  // namespace

std::unique_ptr<Compressor> make_variance(double density, const CompressorOptions& o) {
  if (!(std::isfinite(o.variance_alpha) && o.variance_alpha >= 0.0))
    throw Error("variance compressor: alpha = " + std::to_string(o.variance_alpha) +
                " must be finite and >= 0 (the paper uses 1 to 2)");
  if (!(o.variance_zeta >= 0.0 && o.variance_zeta <= 1.0))
    throw Error("variance compressor: zeta = " + std::to_string(o.variance_zeta) +
                " must lie in [0, 1] (the paper uses 0.999)");
  return std::make_unique<VarianceCompressor>(density, o.variance_alpha, o.variance_zeta);
}

}  // namespace gs::compress::detail
