#include "gs/compress/momentum.hpp"

#include <sstream>

#include "gs/base/error.hpp"
#include "write_stats.hpp"

namespace gs::compress {

bool supports_momentum_correction(const Compressor& c) {
  return c.exchange() == Exchange::allgather && c.error_feedback();
}

MomentumCorrection::MomentumCorrection(double momentum, const Compressor& c, std::string_view setting)
    : momentum_(momentum) {
  std::ostringstream m;
  if (!(momentum >= 0.0 && momentum < 1.0)) {
    m << setting << " is the momentum the workers keep, in [0, 1); got " << momentum;
    throw Error(m.str());
  }
  if (momentum > 0.0 && density_based(c.name()) && c.density() >= 1.0) {
    m << setting << " does nothing at density 1: every step then sends the dense gradient; drop it, or "
      << "compress at a density below 1";
    throw Error(m.str());
  }
  if (momentum > 0.0 && !supports_momentum_correction(c)) {
    m << setting << " masks the coordinates a sparse compressor with error feedback sends; '" << c.name()
      << "' is not one: leave the momentum to the optimizer";
    throw Error(m.str());
  }
}

std::span<const float> MomentumCorrection::advance(std::string_view name, std::span<const float> g,
                                                   StatsOnWrite* stats) {
  return velocity_.accumulate(name, g, static_cast<float>(momentum_), stats);
}

std::span<const float> MomentumCorrection::advance_into(std::string_view name, std::span<const float> g,
                                                        ResidualMemory& residual, StatsOnWrite* stats) {
  const auto v = velocity_.begin_accumulate(name, g.size());
  const auto r = residual.begin_accumulate(name, g.size());
  const float m = static_cast<float>(momentum_);
  detail::write_taking(r.acc, stats, [&](std::size_t begin, std::size_t end) {
    const float* __restrict u0 = v.e.data();
    const float* __restrict e = r.e.data();
    const float* __restrict gi = g.data();
    float* __restrict u = v.acc.data();
    float* __restrict acc = r.acc.data();
    for (std::size_t i = begin; i < end; ++i) {
      const float ui = m * u0[i] + gi[i];
      u[i] = ui;
      acc[i] = ui + e[i];
    }
  });
  return r.acc;
}

void MomentumCorrection::commit(std::string_view name, const Payload& p, const Compressor& c) {
  if (p.kind != PayloadKind::sparse) throw Error("momentum correction: a dense payload masks nothing (please report)");
  velocity_.commit(name, p, c);  // u = the new u, the sent entries zeroed
}

}  // namespace gs::compress
