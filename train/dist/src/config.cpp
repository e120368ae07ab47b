// TrainConfig and its option table: one row per `gradscope train` option, from which the CLI,
// validation, the workers' comparison line, their arguments and the JSON echo are generated.
#include "gs/dist/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "gs/error.hpp"
#include "gs/train/capture.hpp"

namespace gs::dist {
namespace {

// The shortest text that reads back as exactly v (so worker arguments reproduce the config).
std::string real_text(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

[[noreturn]] void bad_text(std::string_view flag, std::string_view text, const char* what) {
  throw Error(std::string(flag) + ": '" + std::string(text) + "' is not " + what);
}

template <class T>
T parse_integer(std::string_view flag, std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad_text(flag, text, "an integer");
  return v;
}

double parse_real(std::string_view flag, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) bad_text(flag, text, "a number");
  return v;
}

std::vector<int> parse_int_list(std::string_view flag, std::string_view text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    out.push_back(parse_integer<int>(flag, text.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

// A row for a field reached through `access` (a lambda returning a reference into the config).
// `check` receives the value; it throws gs::Error (with the flag in its text) when out of range.
template <class T, class Access>
TrainOption field(std::string flag, std::string help, OptionScope scope, std::string json_key,
                  Access access, std::function<void(const T&)> check = {},
                  std::vector<std::string> choices = {}) {
  TrainOption o;
  o.flag = std::move(flag);
  o.help = std::move(help);
  o.scope = scope;
  o.json_key = std::move(json_key);
  o.choices = std::move(choices);
  using C = TrainConfig;
  if constexpr (std::is_same_v<T, bool>) {
    o.kind = ValueKind::flag;
    o.get = [access](const C& c) { return std::string(access(c) ? "1" : "0"); };
    o.set = [access, f = o.flag](C& c, std::string_view t) {
      if (t != "1" && t != "0" && t != "true" && t != "false") bad_text(f, t, "a switch (1 or 0)");
      access(c) = t == "1" || t == "true";
    };
  } else if constexpr (std::is_same_v<T, std::string>) {
    o.kind = ValueKind::text;
    o.get = [access](const C& c) { return access(c); };
    o.set = [access](C& c, std::string_view t) { access(c) = std::string(t); };
  } else if constexpr (std::is_same_v<T, double>) {
    o.kind = ValueKind::real;
    o.get = [access](const C& c) { return real_text(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = parse_real(f, t); };
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    o.kind = ValueKind::int_list;
    o.get = [access](const C& c) { return compress::bits_text(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) {
      access(c) = t.empty() ? std::vector<int>{} : parse_int_list(f, t);
    };
  } else {
    o.kind = ValueKind::integer;
    o.get = [access](const C& c) { return std::to_string(access(c)); };
    o.set = [access, f = o.flag](C& c, std::string_view t) { access(c) = parse_integer<T>(f, t); };
  }
  auto choice_check = [f = o.flag, ch = o.choices](const T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!ch.empty() && std::find(ch.begin(), ch.end(), v) == ch.end()) {
        std::string list;
        for (const auto& c : ch) list += (list.empty() ? "" : ", ") + c;
        throw Error(f + " '" + v + "' is not one of " + list);
      }
    }
  };
  o.check = [access, check, choice_check](const C& c) {
    const T& v = access(c);
    choice_check(v);
    if (check) check(v);
  };
  return o;
}

// An accessor of one field, for a const or a mutable config alike.
#define GS_FIELD(expr) [](auto& c) -> auto& { return expr; }

template <class T>
std::function<void(const T&)> at_least(std::string flag, T low, std::string rule) {
  return [flag, low, rule](const T& v) {
    if (v < low) throw Error(flag + " must be " + rule);
  };
}

std::vector<std::string> compressor_choices() {
  std::vector<std::string> v;
  for (auto n : compress::compressor_names()) v.emplace_back(n);
  return v;
}

std::vector<TrainOption> make_table() {
  using S = OptionScope;
  std::vector<TrainOption> t;
  t.push_back(field<std::string>("--model", "model to train", S::shared, "model",
                                 GS_FIELD(c.model), {}, train::model_names()));
  t.push_back(field<std::string>("--compressor", "compression method (docs/compressors.md)", S::shared, "compressor",
                                 GS_FIELD(c.compressor), {}, compressor_choices()));
  t.push_back(field<double>("--ratio", "target density: fraction of elements sent, in (0, 1]",
                            S::shared, "ratio", GS_FIELD(c.density), [](const double& v) {
                              if (!(v > 0.0 && v <= 1.0))
                                throw Error("--ratio " + std::to_string(v) + " is outside (0, 1]");
                            }));
  t.push_back(field<int>("--workers", "worker processes (world size)", S::shared, "workers",
                         GS_FIELD(c.workers), at_least<int>("--workers", 1, "at least 1")));
  t.push_back(field<std::int64_t>("--steps", "stop after this many steps (0: run the epochs)",
                                  S::shared, "steps", GS_FIELD(c.steps),
                                  at_least<std::int64_t>("--steps", 0, ">= 0 (0: run the epochs)")));
  t.push_back(field<int>("--epochs", "passes over each worker's shard", S::shared, "epochs",
                         GS_FIELD(c.epochs), at_least<int>("--epochs", 1, "at least 1")));
  t.push_back(field<std::string>("--granularity", "layer, model or bucket", S::shared,
                                 "granularity", GS_FIELD(c.granularity), {},
                                 {"layer", "model", "bucket"}));
  t.push_back(field<std::uint64_t>("--bucket-size", "elements per bucket (--granularity bucket)",
                                   S::shared, "bucket_size", GS_FIELD(c.bucket_size),
                                   at_least<std::uint64_t>("--bucket-size", 1, "at least 1")));
  t.push_back(field<std::int64_t>("--batch", "examples per worker per step", S::shared, "batch",
                                  GS_FIELD(c.batch), at_least<std::int64_t>("--batch", 1, "at least 1")));
  t.push_back(field<double>("--lr", "SGD learning rate (of the first step)", S::shared, "lr",
                            GS_FIELD(c.lr), [](const double& v) {
                              if (!(v > 0.0) || !std::isfinite(v))
                                throw Error("--lr must be a positive number");
                            }));
  t.push_back(field<std::string>("--lr-schedule",
                                 "constant; cosine: decays from --lr to 0 over the run's steps; "
                                 "step: --lr / 10 over the last tenth of the steps",
                                 S::shared, "lr_schedule", GS_FIELD(c.lr_schedule), {},
                                 {"constant", "cosine", "step"}));
  t.push_back(field<double>("--momentum", "SGD momentum", S::shared, "momentum",
                            GS_FIELD(c.momentum), [](const double& v) {
                              if (!(v >= 0.0 && v < 1.0)) throw Error("--momentum must be in [0, 1)");
                            }));
  t.push_back(field<bool>("--momentum-correction",
                          "keep the momentum per worker before sparsification, masked where sent (DGC)",
                          S::shared, "momentum_correction", GS_FIELD(c.momentum_correction)));
  t.push_back(field<std::int64_t>(
      "--warmup-steps", "warm up over the first N steps (see --warmup-schedule), then compress at --ratio",
      S::shared, "warmup_steps", GS_FIELD(c.warmup_steps),
      at_least<std::int64_t>("--warmup-steps", 0, ">= 0")));
  auto with_warmup = [](const TrainConfig& c) { return c.warmup_steps > 0; };
  t.push_back(field<std::string>("--warmup-schedule",
                                 "dense: exchange the warm-up steps uncompressed; exponential: compress "
                                 "them at a density falling geometrically from --warmup-start-ratio "
                                 "to --ratio (DGC)",
                                 S::shared, "warmup_schedule", GS_FIELD(c.warmup_schedule), {},
                                 {"dense", "exponential"}));
  t.back().matters = with_warmup;
  t.push_back(field<double>("--warmup-start-ratio", "exponential warm-up: the density of the first step",
                            S::shared, "warmup_start_ratio", GS_FIELD(c.warmup_start_density)));
  t.back().matters = [](const TrainConfig& c) { return c.exponential_warmup(); };
  t.push_back(field<std::uint64_t>("--seed", "seed of the model, the data order and the sampling",
                                   S::shared, "seed", GS_FIELD(c.seed)));
  t.push_back(field<int>("--stages", "SIDCo stages: 0 adaptive, else fixed", S::shared, "stages",
                         GS_FIELD(c.compression.stages),
                         at_least<int>("--stages", 0, "0 (adaptive) or a fixed count >= 1")));
  t.push_back(field<std::vector<int>>(
      "--bits", "qsgd-mn*: bits per scale, ascending, e.g. 4 (qsgd-mn), 6,10 (-ts), 4,6,8,10 (-ms)",
      S::shared, "bits", GS_FIELD(c.compression.quant_bits)));
  t.push_back(field<double>("--variance-alpha", "variance: send an element when r^2 > alpha * v",
                            S::shared, "variance_alpha", GS_FIELD(c.compression.variance_alpha)));
  t.push_back(field<double>("--variance-zeta", "variance: decay of v for elements not sent",
                            S::shared, "variance_zeta", GS_FIELD(c.compression.variance_zeta)));
  t.push_back(field<int>("--fft-exponent-bits", "fft: exponent bits of the kept coefficients' float layout",
                         S::shared, "fft_exponent_bits", GS_FIELD(c.compression.fft_exponent_bits)));
  t.push_back(field<int>("--fft-mantissa-bits", "fft: mantissa bits of the kept coefficients' float layout",
                         S::shared, "fft_mantissa_bits", GS_FIELD(c.compression.fft_mantissa_bits)));
  t.push_back(field<std::uint64_t>("--fft-chunk", "fft: real FFT length (0: the method's default)",
                                   S::shared, "fft_chunk", GS_FIELD(c.compression.fft_chunk)));
  t.push_back(field<std::string>("--backend",
                                 "kernels backend (threshold fits, fft transforms): auto, cpu or cuda",
                                 S::worker, "backend", GS_FIELD(c.compression.backend), {},
                                 {"auto", "cpu", "cuda"}));
  t.push_back(field<double>("--timeout", "seconds a worker waits on its peers before failing",
                            S::worker, "", GS_FIELD(c.timeout), [](const double& v) {
                              if (!(v > 0.0)) throw Error("--timeout must be positive (seconds)");
                            }));
  t.push_back(field<std::string>("--record", "record rank 0's raw gradients to this snapshot (.h5)",
                                 S::output, "", GS_FIELD(c.record)));
  t.push_back(field<bool>("--force", "overwrite the --record file", S::output, "", GS_FIELD(c.force)));
  t.push_back(field<bool>("--json", "print one JSON object at the end", S::output, "", GS_FIELD(c.json)));
  t.push_back(field<bool>("--quiet", "no per-step lines", S::output, "", GS_FIELD(c.quiet)));
  t.push_back(field<int>("--rank", "this worker's rank (manual placement; needs --master-port)",
                         S::placement, "", GS_FIELD(c.rank)));
  t.push_back(field<std::string>("--master-addr", "address of rank 0's store", S::placement, "",
                                 GS_FIELD(c.master_addr)));
  t.push_back(field<int>("--master-port", "port of rank 0's store", S::placement, "",
                         GS_FIELD(c.master_port)));
  return t;
}

#undef GS_FIELD

}  // namespace

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

const TrainOption& train_option(std::string_view flag) {
  for (const auto& o : train_options())
    if (o.flag == flag) return o;
  throw Error("gradscope train has no option " + std::string(flag));
}

void TrainConfig::validate() const {
  for (const auto& o : train_options()) o.check(*this);
  if (exponential_warmup()) {
    if (!compress::density_based(compressor))
      throw Error("--warmup-schedule exponential walks the density down, and compressor '" +
                  compressor + "' has no density; use the dense warm-up");
    if (!(warmup_start_density > density && warmup_start_density <= 1.0)) {
      std::ostringstream m;
      m << "--warmup-start-ratio " << warmup_start_density << " must lie above --ratio (" << density
        << ") and at most 1 for an exponential warm-up";
      throw Error(m.str());
    }
  }
  if (rank >= workers) throw Error("--rank must be below --workers (world size)");
}

double TrainConfig::lr_at(std::int64_t step, std::int64_t total) const {
  if (total <= 1 || lr_schedule == "constant") return lr;
  if (lr_schedule == "step") return step >= total - std::max<std::int64_t>(1, total / 10) ? 0.1 * lr : lr;
  constexpr double kPi = 3.14159265358979323846;
  return 0.5 * lr * (1.0 + std::cos(kPi * double(step) / double(total)));
}

double TrainConfig::density_at(std::int64_t step) const {
  if (!warmup_at(step)) return density;
  if (!exponential_warmup()) return 1.0;
  return warmup_start_density *
         std::pow(density / warmup_start_density, double(step) / double(warmup_steps));
}

compress::CompressorOptions TrainConfig::compressor_options(int r) const {
  compress::CompressorOptions o = compression;
  o.seed = seed * 1000003ull + std::uint64_t(r);
  return o;
}

std::string TrainConfig::shared_description() const {
  std::string s;
  for (const auto& o : train_options())
    if (o.scope == OptionScope::shared && (!o.matters || o.matters(*this))) {
      if (!s.empty()) s += ' ';
      s.append(o.flag, 2).append("=").append(o.get(*this));
    }
  return s;
}

std::vector<std::string> TrainConfig::worker_args(int r, int port) const {
  std::vector<std::string> a;
  for (const auto& o : train_options()) {
    const bool passed = o.scope == OptionScope::shared || o.scope == OptionScope::worker ||
                        (o.scope == OptionScope::output && r == 0);
    if (!passed || (o.matters && !o.matters(*this))) continue;
    if (o.kind == ValueKind::flag) {
      if (o.get(*this) == "1") a.push_back(o.flag);
    } else if (o.kind != ValueKind::int_list || !o.get(*this).empty()) {
      if (o.scope == OptionScope::output && o.get(*this).empty()) continue;
      a.insert(a.end(), {o.flag, o.get(*this)});
    }
  }
  if (r != 0) a.push_back("--quiet");
  a.insert(a.end(), {"--rank", std::to_string(r), "--master-addr", "127.0.0.1", "--master-port",
                     std::to_string(port)});
  return a;
}

}  // namespace gs::dist
