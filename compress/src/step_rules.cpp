#include "gs/compress/step_rules.hpp"

#include <cmath>
#include <sstream>

#include "gs/base/quantile.hpp"
#include "gs/error.hpp"

namespace gs::compress {

WarmupSchedule::Kind WarmupSchedule::parse_kind(std::string_view name) {
  if (name == "dense") return Kind::dense;
  if (name == "exponential") return Kind::exponential;
  throw Error("unknown warm-up schedule '" + std::string(name) + "': use dense or exponential");
}

std::string_view WarmupSchedule::to_string(Kind k) {
  return k == Kind::dense ? "dense" : "exponential";
}

double WarmupSchedule::density_at(std::int64_t step) const {
  if (!warmup_at(step)) return density;
  if (!exponential()) return 1.0;
  return start_density * std::pow(density / start_density, double(step) / double(steps));
}

void WarmupSchedule::check(bool density_based, std::string_view compressor, const Names& names) const {
  if (steps < 0)
    throw Error(std::string(names.steps) + " must be >= 0, got " + std::to_string(steps));
  if (!exponential()) return;
  if (!density_based)
    throw Error(std::string(names.kind) + " exponential walks the density down, and compressor '" +
                std::string(compressor) + "' has no density; use the dense warm-up");
  if (!(start_density > density && start_density <= 1.0)) {
    std::ostringstream m;
    m << names.start_density << " " << start_density << " must lie above " << names.density << " ("
      << density << ") and at most 1 for an exponential warm-up";
    throw Error(m.str());
  }
}

void SkipRule::record(bool skipped, std::int64_t step, std::string_view advice) {
  if (!skipped) {
    in_a_row_ = 0;
    return;
  }
  ++skipped_;
  if (++in_a_row_ >= kMaxSkippedInARow)
    throw Error("gradients were NaN or Inf for " + std::to_string(kMaxSkippedInARow) +
                " steps in a row (last at step " + std::to_string(step) + "); " + std::string(advice));
}

void SkipRule::save_state(StateWriter& w) const {
  w.put(skipped_);
  w.put<std::int32_t>(in_a_row_);
}

void SkipRule::load_state(StateReader& r) {
  skipped_ = r.get<std::int64_t>();
  in_a_row_ = r.get<std::int32_t>();
  if (skipped_ < 0 || in_a_row_ < 0 || in_a_row_ > skipped_) r.fail("its skipped-step counts are inconsistent");
}

void RunStatistics::add(const StepFigures& s) {
  ++steps_;
  if (s.skipped) {
    ++skipped_;
    return;
  }
  ++counted_;
  if (!s.warmup) {
    quality_.push_back(s.quality);
    density_compressed_ += s.density;
  }
  density_ += s.density;
  bytes_ += s.bytes_sent;
  dense_ += s.dense_bytes;
  gathered_ += s.gathered_bytes;
  bus_ += s.host_device_bytes;
  bus_gathered_ += s.host_device_gathered_bytes;
  compress_ += s.compress_seconds;
  comm_ += s.comm_seconds;
  hook_ += s.hook_seconds;
  step_ += s.step_seconds;
}

RunSummary RunStatistics::summary() const {
  RunSummary s;
  s.steps = steps_;
  s.skipped_steps = skipped_;
  if (counted_ == 0) return s;
  const double n = double(counted_);
  if (!quality_.empty()) {
    double sum = 0.0;
    for (double q : quality_) sum += q;
    s.quality_mean = sum / double(quality_.size());
    s.quality_p5 = quantile(quality_, 0.05);
    s.quality_p95 = quantile(quality_, 0.95);
    s.density_mean = density_compressed_ / double(quality_.size());
  }
  s.density_mean_all = density_ / n;
  s.bytes_per_step = bytes_ / n;
  s.dense_bytes_per_step = dense_ / n;
  s.gathered_bytes_per_step = gathered_ / n;
  s.host_device_bytes_per_step = bus_ / n;
  s.host_device_gathered_bytes_per_step = bus_gathered_ / n;
  s.compress_ms_per_step = 1e3 * compress_ / n;
  s.comm_ms_per_step = 1e3 * comm_ / n;
  s.hook_ms_per_step = 1e3 * hook_ / n;
  s.step_ms = 1e3 * step_ / n;
  return s;
}

void RunStatistics::save_state(StateWriter& w) const {
  w.put(steps_);
  w.put(skipped_);
  w.put(counted_);
  for (double v : {density_, density_compressed_, bytes_, dense_, gathered_, bus_, bus_gathered_, compress_, comm_,
                   hook_, step_})
    w.put(v);
  w.put_array<double>(quality_);
}

void RunStatistics::load_state(StateReader& r) {
  steps_ = r.get<std::int64_t>();
  skipped_ = r.get<std::int64_t>();
  counted_ = r.get<std::int64_t>();
  for (double* v : {&density_, &density_compressed_, &bytes_, &dense_, &gathered_, &bus_, &bus_gathered_,
                    &compress_, &comm_, &hook_, &step_})
    *v = r.get<double>();
  quality_ = r.get_array<double>();
  if (steps_ < 0 || skipped_ < 0 || counted_ != steps_ - skipped_ ||
      std::int64_t(quality_.size()) > counted_)
    r.fail("its step statistics are inconsistent");
}

}  // namespace gs::compress
