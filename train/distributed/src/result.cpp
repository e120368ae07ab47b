// What a run reports: the summary over its steps, and the --json output of `gradscope train` (the
// config echoed from the option table, the summary and the per-step arrays).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "gs/distributed/trainer.hpp"

namespace gs::distributed {

TrainSummary summarize(const TrainResult& r) {
  compress::RunStatistics stats;
  for (const auto& st : r.steps) stats.add(st.stats, st.step_seconds);
  return stats.summary();
}

namespace {
// A step's exchange, from the configuration (restored steps keep no record of it): what
// --exchange ran at the step's density among the workers ("dense" for a dense step).
std::string exchange_of(const TrainConfig& c, const compress::StepStats& st) {
  if (st.dense) return "dense";
  const auto mode = compress::exchange_mode(c.exchange, "--exchange");
  return std::string(compress::to_string(compress::resolve_exchange(
      mode, c.workers, st.target_density, compress::exchanges_sparse_selection(c.compressor))));
}
}  // namespace

std::string to_json(const TrainConfig& c, const TrainResult& r) {
  using nlohmann::json;
  const TrainSummary s = summarize(r);
  json steps = json::array();
  for (const auto& [step, epoch, lr, loss, step_seconds, st] : r.steps)
    steps.push_back({{"step", step},
                     {"epoch", epoch},
                     {"lr", lr},
                     {"loss", loss},
                     {"skipped", st.skipped},
                     {"warmup", st.warmup},
                     {"dense", st.dense},
                     {"critical", st.critical},
                     {"exchange", exchange_of(c, st)},
                     {"target_density", st.target_density},
                     {"density", st.density()},
                     {"quality", st.quality()},
                     {"stages", st.stages},
                     {"corrected", st.corrected},
                     {"exact", st.exact},
                     {"estimate_quality", st.estimate_quality()},  // NaN (no estimate): null
                     {"bytes_sent", st.bytes_sent},
                     {"dense_bytes", st.dense_bytes},
                     {"compress_s", st.compress_seconds},
                     {"comm_s", st.comm_seconds},
                     {"step_s", step_seconds}});
  json config = json::object();
  for (const auto& o : train_options()) {
    if (!o.in_json) continue;
    const std::string v = o.get(c);
    json& field = config[o.key()];
    switch (o.kind) {
      case ValueKind::text:
        field = v;
        break;
      case ValueKind::flag:
        field = v == "1";
        break;
      case ValueKind::integer:
        field = json::parse(v);
        break;
      case ValueKind::real:
        field = std::stod(v);
        break;
      case ValueKind::int_list:
      case ValueKind::real_list:
        field = json::parse("[" + v + "]");
        break;
      case ValueKind::text_list:
        field = json::array();
        for (const auto item : split_list(v)) field.push_back(std::string(item));
        break;
    }
  }
  json j = {{"config", config},
            {"parameters", r.parameters},
            {"train_examples_per_worker", r.train_examples_per_worker},
            {"steps_run", r.steps.size()},
            {"skipped_steps", r.skipped_steps},
            {"final_loss", r.final_loss},
            {"test_accuracy", r.test_accuracy},
            {"wall_s", r.wall_seconds},
            {"replica_max_diff", r.replica_max_diff},
            {"param_digest", r.param_digest},
            {"resumed_from_step", r.resumed_from},
            {"summary",
             {{"quality_mean", s.quality_mean},
              {"quality_p5", s.quality_p5},
              {"quality_p95", s.quality_p95},
              {"density_mean", s.density_mean},
              {"density_mean_all", s.density_mean_all},
              {"critical_steps", s.critical_steps},
              {"estimate_in_band", s.estimate_in_band},
              {"corrected_share", s.corrected_share},
              {"exact_share", s.exact_share},
              {"bytes_per_step", s.bytes_per_step},
              {"dense_bytes_per_step", s.dense_bytes_per_step},
              {"compress_ms_per_step", s.compress_ms_per_step},
              {"comm_ms_per_step", s.comm_ms_per_step},
              {"step_ms", s.step_ms}}},
            {"per_step", steps}};
  return j.dump();
}

}  // namespace gs::distributed
