// gradscope fit INPUT [--step S] [--layer NAME | --whole-model] [--ratios ...] [--dists ...]
//                     [--methods ...] [--backend auto|cpu|cuda] [--on-device-error stop|cpu]
//                     [--stages M] [--json]
// Fits the sparsity-inducing distributions to x = |g| of one snapshot step (or a .npy vector),
// tests their fit and compares threshold methods. The work is gs::fit_report (fitting/); this file
// loads the data (snapshot vectors through gs::analyzer, shared with `gradscope analyze`), picks
// the backend and prints.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "device_failure.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/report.hpp"
#include "gs/kernels/backend.hpp"
#include "vector_input.hpp"

namespace gs::cli {
namespace {

struct FitConfig {
  VectorInput input;
  std::string backend = "auto";
  std::string on_device_error = "stop";  // analyzer::kOnDeviceErrorChoices
  bool json = false;
  fitting::FitReportOptions report;
};

void print_table(const fitting::FitReport& r, const std::string& source, const std::string& backend) {
  std::printf("%s: n = %llu, excluded = %llu (%llu zero, %llu non-finite), backend %s\n\n", source.c_str(),
              (unsigned long long)r.n, (unsigned long long)r.excluded, (unsigned long long)r.zeros,
              (unsigned long long)r.nonfinite, backend.c_str());
  std::printf("%-12s %-34s %16s %16s %10s %10s %12s\n", "dist", "params", "loglik", "aic", "ks_D", "ks_p", "ad_A2");
  for (const auto& f : r.fits) {
    if (!f.error.empty()) {
      std::printf("%-12s (no fit: %s)\n", f.dist.c_str(), f.error.c_str());
      continue;
    }
    std::string p;
    for (const auto& [k, v] : f.params) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s=%.6g", p.empty() ? "" : " ", k.c_str(), v);
      p += buf;
    }
    std::printf("%-12s %-34s %16.6g %16.6g %10.4g %10.3g %12.5g\n", f.dist.c_str(), p.c_str(), f.loglik, f.aic, f.ks_D,
                f.ks_p, f.ad_A2);
  }
  if (!r.fits.empty() && r.fits.front().error.empty())
    std::printf("(KS/AD on %llu points%s)\n", (unsigned long long)r.fits.front().ks_n,
                r.fits.front().ks_subsampled ? ", a uniform random subsample" : ", all of them");
  std::printf("\n%-14s %8s %7s %14s %12s %9s\n", "method", "ratio", "stages", "threshold", "selected", "quality");
  for (const auto& t : r.thresholds) {
    if (!t.error.empty()) {
      std::printf("%-14s %8g (not run: %s)\n", t.result.method.c_str(), t.result.density, t.error.c_str());
      continue;
    }
    std::printf("%-14s %8g %7d %14.6g %12llu %9.4f\n", t.result.method.c_str(), t.result.density, t.result.stages,
                t.result.threshold, (unsigned long long)t.result.selected, t.result.quality);
  }
}

fitting::FitReport fit_on(const LoadedVector& in, kernels::BackendKind kind, const fitting::FitReportOptions& o) {
  const auto passes = kernels::make_passes(in.values, kind);
  return fitting::fit_report(*passes, o);
}

int run_fit(const FitConfig& cfg) {
  kernels::BackendKind kind = kernels::resolve_backend(cfg.backend);
  const LoadedVector in = load_vector(cfg.input);
  fitting::FitReport report;
  std::string device_error;  // the failure the CPU retry followed
  try {
    report = fit_on(in, kind, cfg.report);
  } catch (const DeviceFailure& e) {
    if (cfg.on_device_error != "cpu" || kind == kernels::BackendKind::cpu) throw device_stop(e);
    device_error = e.what();
    warn_ran_on_cpu(std::string(kernels::to_string(kind)), device_error, "fitted again");
    kind = kernels::BackendKind::cpu;
    report = fit_on(in, kind, cfg.report);
  }
  const std::string backend(kernels::to_string(kind));
  if (cfg.json)
    std::printf("%s\n", analyzer::fit_json(report, in.source, backend, device_error).dump(2).c_str());
  else
    print_table(report, in.source, backend);
  return 0;
}

Runner setup(CLI::App& sub) {
  auto cfg = std::make_shared<FitConfig>();
  sub.add_option("input", cfg->input.path, "gradscope snapshot (.h5) or .npy float32/float64 vector")->required();
  cfg->input.add_options(sub);
  sub.add_option("--ratios", cfg->report.densities, "target densities in (0, 1)")
      ->delimiter(',')
      ->capture_default_str();
  sub.add_option("--dists", cfg->report.dists, gs::fitting::comma_list(gs::fitting::all_dists()))
      ->delimiter(',')
      ->capture_default_str();
  sub.add_option("--methods", cfg->report.methods, gs::fitting::comma_list(gs::fitting::all_methods()))
      ->delimiter(',')
      ->capture_default_str();
  sub.add_option("--backend", cfg->backend, "auto, cpu or cuda")->capture_default_str();
  add_on_device_error_option(sub, cfg->on_device_error);
  sub.add_option("--stages", cfg->report.stages,
                 "SIDCo stages, fixed (no adaptive controller); 0: by density, 1 at 0.1, 2 at 0.01, "
                 "3 at 0.001 (docs/python.md)")
      ->capture_default_str();
  sub.add_flag("--recount", cfg->report.sidco.recount,
               "SIDCo tail stages aim at the planned count (corrects a stage's error)");
  sub.add_flag("!--sidco-as-published", cfg->report.sidco.correct,
               "SIDCo without its count correction (docs/algorithms.md), as the paper's code places it");
  sub.add_option("--ks-max-points", cfg->report.ks_max_points,
                 "KS/AD sample size; larger inputs use a uniform random subsample")
      ->capture_default_str();
  sub.add_option("--seed", cfg->report.seed, "seed of the KS subsample and DGC's sample")->capture_default_str();
  sub.add_flag("--json", cfg->json, "print JSON (docs/analysis-format.md, last section) instead of a table");
  return [cfg] { return run_fit(*cfg); };
}

GS_COMMAND("fit", "Fit distributions to |g| and compare threshold estimates", 30, setup);

}  // namespace
}  // namespace gs::cli
