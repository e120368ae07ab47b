#include "gs/dist/config.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "gs/error.hpp"

namespace gs::dist {

void TrainConfig::validate() const {
  if (!(ratio > 0.0 && ratio <= 1.0))
    throw Error("--ratio " + std::to_string(ratio) + " is outside (0, 1]");
  if (workers < 1) throw Error("--workers must be at least 1");
  if (steps < 0) throw Error("--steps must be >= 0 (0: run the epochs)");
  if (epochs < 1) throw Error("--epochs must be at least 1");
  if (batch < 1) throw Error("--batch must be at least 1");
  if (!(lr > 0.0) || !std::isfinite(lr)) throw Error("--lr must be a positive number");
  if (!(momentum >= 0.0 && momentum < 1.0)) throw Error("--momentum must be in [0, 1)");
  if (lr_schedule != "constant" && lr_schedule != "cosine" && lr_schedule != "step")
    throw Error("--lr-schedule '" + lr_schedule + "' is not constant, cosine or step");
  if (warmup_steps < 0) throw Error("--warmup-steps must be >= 0");
  if (warmup_schedule != "dense" && warmup_schedule != "exponential")
    throw Error("--warmup-schedule '" + warmup_schedule + "' is not dense or exponential");
  if (exponential_warmup()) {
    if (!compress::density_based(compressor))
      throw Error("--warmup-schedule exponential walks the density down, and compressor '" +
                  compressor + "' has no density ratio; use the dense warm-up");
    if (!(warmup_start_ratio > ratio && warmup_start_ratio <= 1.0)) {
      std::ostringstream m;
      m << "--warmup-start-ratio " << warmup_start_ratio << " must lie above --ratio (" << ratio
        << ") and at most 1 for an exponential warm-up";
      throw Error(m.str());
    }
  }
  if (!(timeout > 0.0)) throw Error("--timeout must be positive (seconds)");
  if (granularity == "bucket" && bucket_size < 1) throw Error("--bucket-size must be at least 1");
  if (rank >= workers) throw Error("--rank must be below --workers (world size)");
}

std::string TrainConfig::bits_list() const { return compress::bits_text(bits); }

double TrainConfig::lr_at(std::int64_t step, std::int64_t total) const {
  if (total <= 1 || lr_schedule == "constant") return lr;
  if (lr_schedule == "step") return step >= total - std::max<std::int64_t>(1, total / 10) ? 0.1 * lr : lr;
  constexpr double kPi = 3.14159265358979323846;
  return 0.5 * lr * (1.0 + std::cos(kPi * double(step) / double(total)));
}

double TrainConfig::ratio_at(std::int64_t step) const {
  if (!warmup_at(step)) return ratio;
  if (!exponential_warmup()) return 1.0;
  return warmup_start_ratio * std::pow(ratio / warmup_start_ratio, double(step) / double(warmup_steps));
}

compress::CompressorOptions TrainConfig::compressor_options(int r) const {
  compress::CompressorOptions o;
  o.seed = seed * 1000003ull + std::uint64_t(r);
  o.backend = backend;
  o.stages = stages;
  o.quant_bits = bits;
  o.variance_alpha = variance_alpha;
  o.variance_zeta = variance_zeta;
  o.fft_exponent_bits = fft_exponent_bits;
  o.fft_mantissa_bits = fft_mantissa_bits;
  o.fft_chunk = fft_chunk;
  return o;
}

std::string TrainConfig::shared_description() const {
  std::ostringstream s;
  s.precision(17);
  s << "model=" << model << " compressor=" << compressor << " ratio=" << ratio
    << " workers=" << workers << " steps=" << steps << " epochs=" << epochs
    << " granularity=" << granularity << " bucket=" << bucket_size << " batch=" << batch
    << " lr=" << lr << " lr_schedule=" << lr_schedule << " momentum=" << momentum
    << " momentum_correction=" << momentum_correction << " warmup_steps=" << warmup_steps;
  if (warmup_steps > 0) s << " warmup_schedule=" << warmup_schedule;
  if (exponential_warmup()) s << " warmup_start_ratio=" << warmup_start_ratio;
  s << " seed=" << seed << " stages=" << stages
    << " bits=" << bits_list() << " variance_alpha=" << variance_alpha
    << " variance_zeta=" << variance_zeta << " fft_exponent_bits=" << fft_exponent_bits
    << " fft_mantissa_bits=" << fft_mantissa_bits << " fft_chunk=" << fft_chunk;
  return s.str();
}

std::vector<std::string> TrainConfig::worker_args(int r, int port) const {
  auto num = [](double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  std::vector<std::string> a = {
      "--model", model, "--compressor", compressor, "--ratio", num(ratio),
      "--workers", std::to_string(workers), "--steps", std::to_string(steps),
      "--epochs", std::to_string(epochs), "--granularity", granularity,
      "--bucket-size", std::to_string(bucket_size), "--batch", std::to_string(batch),
      "--lr", num(lr), "--lr-schedule", lr_schedule, "--momentum", num(momentum), "--seed", std::to_string(seed),
      "--stages", std::to_string(stages), "--backend", backend, "--timeout", num(timeout),
      "--variance-alpha", num(variance_alpha), "--variance-zeta", num(variance_zeta),
      "--fft-exponent-bits", std::to_string(fft_exponent_bits),
      "--fft-mantissa-bits", std::to_string(fft_mantissa_bits),
      "--fft-chunk", std::to_string(fft_chunk),
      "--rank", std::to_string(r), "--master-addr", "127.0.0.1",
      "--master-port", std::to_string(port)};
  if (!bits.empty()) a.insert(a.end(), {"--bits", bits_list()});
  if (momentum_correction) a.push_back("--momentum-correction");
  if (warmup_steps > 0)
    a.insert(a.end(), {"--warmup-steps", std::to_string(warmup_steps), "--warmup-schedule",
                       warmup_schedule, "--warmup-start-ratio", num(warmup_start_ratio)});
  if (r == 0) {
    if (!record.empty()) a.insert(a.end(), {"--record", record});
    if (force) a.push_back("--force");
    if (json) a.push_back("--json");
    if (quiet) a.push_back("--quiet");
  } else {
    a.push_back("--quiet");
  }
  return a;
}

}  // namespace gs::dist
