#include "gs/compress/step_rules.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "gs/base/enum_names.hpp"
#include "gs/base/error.hpp"
#include "gs/base/quantile.hpp"

namespace gs::compress {

WarmupSchedule WarmupSchedule::of(std::int64_t steps, std::string_view kind, double start_density, double density) {
  WarmupSchedule w;
  w.steps = steps;
  w.kind = parse_kind(kind);
  w.start_density = start_density;
  w.density = density;
  return w;
}

constexpr EnumName<WarmupSchedule::Kind> kWarmupKinds[] = {{WarmupSchedule::Kind::dense, "dense"},
                                                           {WarmupSchedule::Kind::exponential, "exponential"}};

WarmupSchedule::Kind WarmupSchedule::parse_kind(std::string_view name) {
  return enum_value(kWarmupKinds, name, "warm-up schedule");
}

std::string_view WarmupSchedule::to_string(Kind k) { return enum_name(kWarmupKinds, k); }

double WarmupSchedule::density_at(std::int64_t step) const {
  if (!warmup_at(step)) return density;
  if (!exponential()) return 1.0;
  return start_density * std::pow(density / start_density, double(step) / double(steps));
}

void WarmupSchedule::check(bool density_based, std::string_view compressor, const Names& names) const {
  if (steps < 0) throw Error(std::string(names.steps) + " must be >= 0, got " + std::to_string(steps));
  if (kind == Kind::exponential && steps == 0)
    throw Error(std::string(names.kind) + " exponential does nothing without " + std::string(names.steps) +
                " (the steps it walks the density down over): give both, or neither");
  if (!exponential() && start_density != WarmupSchedule{}.start_density) {
    std::ostringstream m;
    m << names.start_density << " " << start_density << " does nothing without " << names.kind << " exponential and "
      << names.steps << " > 0: drop it";
    throw Error(m.str());
  }
  if (!exponential()) return;
  if (!density_based)
    throw Error(std::string(names.kind) + " exponential walks the density down, and compressor '" +
                std::string(compressor) + "' has no density; use the dense warm-up");
  if (!(start_density > density && start_density <= 1.0)) {
    std::ostringstream m;
    m << names.start_density << " " << start_density << " must lie above " << names.density << " (" << density
      << ") and at most 1 for an exponential warm-up";
    throw Error(m.str());
  }
}

constexpr EnumName<DensitySchedule::Kind> kScheduleKinds[] = {{DensitySchedule::Kind::constant, "constant"},
                                                              {DensitySchedule::Kind::accordion, "accordion"}};

DensitySchedule::Kind DensitySchedule::parse_kind(std::string_view name) {
  return enum_value(kScheduleKinds, name, "density schedule");
}

std::string_view DensitySchedule::to_string(Kind k) { return enum_name(kScheduleKinds, k); }

void DensitySchedule::check(bool density_based, std::string_view compressor, double density, const Names& names) const {
  std::ostringstream m;
  if (!adaptive()) {
    const DensitySchedule defaults;
    const std::string_view set = high != defaults.high           ? names.high
                                 : interval != defaults.interval ? names.interval
                                 : eta != defaults.eta           ? names.eta
                                                                 : std::string_view();
    if (set.empty()) return;
    m << set << " is a setting of " << names.kind << " accordion and does nothing with the constant "
      << "schedule: drop it, or give " << names.kind << " accordion";
    throw Error(m.str());
  }
  if (!density_based) {
    m << names.kind << " accordion moves the density, and compressor '" << compressor
      << "' has no density; use the constant schedule";
  } else if (!(high > density && high <= 1.0)) {
    m << names.high << " " << high << " must lie above " << names.density << " (" << density
      << ") and at most 1: it is the density of a critical regime, " << names.density << " the density otherwise";
  } else if (interval < 1) {
    m << names.interval << " must be at least 1 (steps between checks), got " << interval;
  } else if (!(eta > 0.0 && std::isfinite(eta))) {
    m << names.eta << " must be a positive number (Accordion's threshold, 0.5 in the paper), got " << eta;
  } else {
    return;
  }
  throw Error(m.str());
}

double RegimeDetector::density_at(const WarmupSchedule& w, std::int64_t step) const {
  if (!on() || w.warmup_at(step)) return w.density_at(step);
  return critical_ ? schedule_.high : w.density;
}

bool RegimeDetector::critical_at(const WarmupSchedule& w, std::int64_t step) const {
  return on() && !w.warmup_at(step) && critical_;
}

void RegimeDetector::add(bool skipped, double squared_norm) {
  // Off, it keeps nothing: its state stays as made, whatever the number of steps.
  if (skipped || !on()) return;
  sum_ += squared_norm;
  ++counted_;
}

void RegimeDetector::decide(double sum_over_workers) {
  const std::int64_t counted = counted_;
  sum_ = 0.0;
  counted_ = 0;
  if (counted == 0) return;
  const double norm = std::sqrt(sum_over_workers / double(counted));
  if (!std::isfinite(norm)) return;
  if (previous_ >= 0.0)  // |norm - previous| / previous >= eta; a previous norm of 0 is a change
    critical_ = previous_ > 0.0 ? std::fabs(norm - previous_) / previous_ >= schedule_.eta : true;
  previous_ = norm;
}

void RegimeDetector::save_state(StateWriter& w) const {
  w.put_text(DensitySchedule::to_string(schedule_.kind));
  w.put(schedule_.high);
  w.put(schedule_.interval);
  w.put(schedule_.eta);
  w.put(sum_);
  w.put(counted_);
  w.put(previous_);
  w.put<std::uint8_t>(critical_);
}

void RegimeDetector::load_state(StateReader& r) {
  r.expect(r.get_text(), std::string(DensitySchedule::to_string(schedule_.kind)), "the density schedule");
  r.expect(r.get<double>(), schedule_.high, "the density of a critical regime");
  r.expect(r.get<std::int64_t>(), schedule_.interval, "the density schedule's interval");
  r.expect(r.get<double>(), schedule_.eta, "the density schedule's threshold eta");
  const double sum = r.get<double>();
  const auto counted = r.get<std::int64_t>();
  const double previous = r.get<double>();
  const auto critical = r.get<std::uint8_t>();
  // On, an interval holds fewer counted steps than its length (decide() starts a new one at its
  // last step). Off, the detector keeps nothing, and what a state holds is read past: states
  // that counted steps with the schedule off (earlier versions) resume as well.
  if (!(sum >= 0.0) || counted < 0 || critical > 1 || (on() && counted >= schedule_.interval))
    r.fail("its density schedule's state is inconsistent");
  if (!on()) return;
  sum_ = sum;
  counted_ = counted;
  previous_ = previous;
  critical_ = critical != 0;
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

CompressionGate::When CompressionGate::parse(std::string_view name) {
  if (name == "always") return When::always;
  if (name == "auto") return When::automatic;
  throw Error("unknown compress-when '" + std::string(name) + "': use always or auto");
}

std::string_view CompressionGate::to_string(When w) { return w == When::always ? "always" : "auto"; }

CompressionGate::CompressionGate(When when, std::int64_t interval) : when_(when), interval_(interval) {
  if (interval < 1)
    throw Error("the interval of compress-when auto must be at least 1 step, got " + std::to_string(interval));
}

bool CompressionGate::dense_at(std::int64_t step) const {
  if (!on()) return false;
  if (compressed_s_ < 0.0) return false;  // the first steps: compressed, then dense
  if (dense_s_ < 0.0) return true;
  return step == look_at_ ? !dense_ : dense_;
}

void CompressionGate::add(std::int64_t step, bool dense, double seconds) {
  if (!on()) return;
  const bool first_of_mode = (dense ? dense_s_ : compressed_s_) < 0.0;
  (dense ? dense_s_ : compressed_s_) = seconds;
  // A choice follows a look, and the first time both modes have a time.
  due_ = step == look_at_ || (first_of_mode && dense_s_ >= 0.0 && compressed_s_ >= 0.0);
}

void CompressionGate::choose(std::int64_t next_step, std::span<const float> max_times) {
  if (max_times.size() != 2)
    throw Error("compress-when auto: two times to choose from, got " + std::to_string(max_times.size()));
  const double dense = max_times[0], compressed = max_times[1];
  const bool first = look_at_ < 0;
  dense_ = dense < compressed;
  const double slow = std::max(dense, compressed), fast = std::min(dense, compressed);
  const double ratio = fast > 0.0 ? std::min(double(kMaxIntervals), std::ceil(slow / fast)) : double(kMaxIntervals);
  // The first choice rests on each mode's first step in the run, which carries one-off costs (DDP
  // builds its buckets, buffers are allocated, the compressor's workspace grows). Where those could
  // decide it (the two times within a factor 2), the step after it runs the chosen mode again and
  // the next one looks at the other, so that the second choice compares warm times of both; a mode
  // more than twice as slow (a dense step on a slow link) is not run again so soon.
  look_at_ = first && ratio <= 2.0 ? next_step + 1 : next_step + std::int64_t(ratio) * interval_;
  due_ = false;
}

void CompressionGate::save_state(StateWriter& w) const {
  w.put_text(to_string(when_));
  w.put(interval_);
  w.put<std::uint8_t>(dense_);
  w.put(dense_s_);
  w.put(compressed_s_);
  w.put(look_at_);
  w.put<std::uint8_t>(due_);
}

void CompressionGate::load_state(StateReader& r) {
  r.expect(r.get_text(), std::string(to_string(when_)), "compress-when");
  r.expect(r.get<std::int64_t>(), interval_, "the interval of compress-when auto");
  const auto dense = r.get<std::uint8_t>();
  const double dense_s = r.get<double>(), compressed_s = r.get<double>();
  const auto look_at = r.get<std::int64_t>();
  const auto due = r.get<std::uint8_t>();
  if (dense > 1 || due > 1 || !std::isfinite(dense_s) || !std::isfinite(compressed_s) || look_at < -1)
    r.fail("its compress-when state is inconsistent");
  dense_ = dense != 0;
  dense_s_ = dense_s;
  compressed_s_ = compressed_s;
  look_at_ = look_at;
  due_ = due != 0;
}

std::string DensityWatch::add(double quality) {
  if (window_.size() == std::size_t(kWindow)) window_.erase(window_.begin());
  window_.push_back(quality);
  if (warned_ || window_.size() < std::size_t(kWindow)) return {};
  double sum = 0.0;
  int low = 0, high = 0;
  for (double q : window_) {
    sum += q;
    low += q < kLow;
    high += q > kHigh;
  }
  const double mean = sum / kWindow;
  if (mean >= kLow && mean <= kHigh && 2 * (low + high) < kWindow) return {};
  warned_ = true;
  std::ostringstream m;
  m.precision(3);
  m << "the achieved density has averaged " << mean << "x the target over the last " << kWindow << " compressed steps, "
    << low << " of them below half of it and " << high
    << " above twice it: the bytes sent are not what the ratio asks for; the per-step statistics "
       "show the density (and SIDCo's stages) step by step";
  return m.str();
}

void RunStatistics::add(const StepStats& s, double step_seconds) {
  ++steps_;
  if (s.skipped) {
    ++skipped_;
    return;
  }
  ++counted_;
  critical_ += s.critical;
  const double density = s.density();
  if (!s.warmup && !s.dense) {  // a compressed step (not compress-when auto's dense ones)
    quality_.push_back(s.quality());
    density_compressed_ += density;
    const double e = s.estimate_quality();
    if (!std::isnan(e)) {
      ++estimated_;
      in_band_ += e >= RunSummary::kEstimateLow && e <= RunSummary::kEstimateHigh;
    }
    groups_ += s.groups();
    corrected_ += s.corrected;
    exact_ += s.exact;
  }
  density_ += density;
  bytes_ += double(s.bytes_sent);
  dense_ += double(s.dense_bytes);
  gathered_ += double(s.gathered_bytes);
  link_ += double(s.link_bytes);
  bus_ += double(s.host_device_bytes);
  bus_gathered_ += double(s.host_device_gathered_bytes);
  syncs_ += double(s.host_syncs);
  overflow_ += double(s.overflow);
  compress_ += s.compress_seconds;
  comm_ += s.comm_seconds;
  hook_ += s.hook_seconds;
  step_ += step_seconds;
}

RunSummary RunStatistics::summary() const {
  RunSummary s;
  s.steps = steps_;
  s.skipped_steps = skipped_;
  s.critical_steps = critical_;
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
  s.link_bytes_per_step = link_ / n;
  s.host_device_bytes_per_step = bus_ / n;
  s.host_device_gathered_bytes_per_step = bus_gathered_ / n;
  s.host_syncs_per_step = syncs_ / n;
  s.overflow_per_step = overflow_ / n;
  s.compress_ms_per_step = 1e3 * compress_ / n;
  s.comm_ms_per_step = 1e3 * comm_ / n;
  s.hook_ms_per_step = 1e3 * hook_ / n;
  s.step_ms = 1e3 * step_ / n;
  if (estimated_ > 0) s.estimate_in_band = double(in_band_) / double(estimated_);
  if (groups_ > 0) {
    s.corrected_share = double(corrected_) / double(groups_);
    s.exact_share = double(exact_) / double(groups_);
  }
  return s;
}

void RunStatistics::save_state(StateWriter& w) const {
  w.put(steps_);
  w.put(skipped_);
  w.put(counted_);
  w.put(critical_);
  for (double v : {density_, density_compressed_, bytes_, dense_, gathered_, bus_, bus_gathered_, syncs_, overflow_,
                   compress_, comm_, hook_, step_})
    w.put(v);
  w.put_array<double>(quality_);
  for (std::int64_t v : {estimated_, in_band_, groups_, corrected_, exact_}) w.put(v);
  w.put(link_);
}

void RunStatistics::load_state(StateReader& r, bool with_waits, bool with_estimates, bool with_links) {
  steps_ = r.get<std::int64_t>();
  skipped_ = r.get<std::int64_t>();
  counted_ = r.get<std::int64_t>();
  critical_ = r.get<std::int64_t>();
  syncs_ = overflow_ = 0.0;
  for (double* v : {&density_, &density_compressed_, &bytes_, &dense_, &gathered_, &bus_, &bus_gathered_})
    *v = r.get<double>();
  if (with_waits) {
    syncs_ = r.get<double>();
    overflow_ = r.get<double>();
  }
  for (double* v : {&compress_, &comm_, &hook_, &step_}) *v = r.get<double>();
  quality_ = r.get_array<double>();
  estimated_ = in_band_ = groups_ = corrected_ = exact_ = 0;
  if (with_estimates)
    for (std::int64_t* v : {&estimated_, &in_band_, &groups_, &corrected_, &exact_}) *v = r.get<std::int64_t>();
  link_ = with_estimates && with_links ? r.get<double>() : 0.0;  // added after the estimates
  if (!(link_ >= 0.0)) r.fail("its link bytes are negative");
  if (estimated_ < 0 || in_band_ < 0 || in_band_ > estimated_ || groups_ < 0 || corrected_ < 0 || exact_ < 0 ||
      corrected_ > groups_ || exact_ > groups_)
    r.fail("its estimate statistics are inconsistent");
  if (steps_ < 0 || skipped_ < 0 || counted_ != steps_ - skipped_ || critical_ < 0 || critical_ > counted_ ||
      std::int64_t(quality_.size()) > counted_)
    r.fail("its step statistics are inconsistent");
}

}  // namespace gs::compress
