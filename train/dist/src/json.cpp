#include <nlohmann/json.hpp>

#include "gs/dist/trainer.hpp"

namespace gs::dist {

std::string to_json(const TrainConfig& c, const TrainResult& r) {
  using nlohmann::json;
  const TrainSummary s = summarize(r);
  json steps = json::array();
  for (const auto& st : r.steps)
    steps.push_back({{"step", st.step}, {"epoch", st.epoch}, {"lr", st.lr}, {"loss", st.loss},
                     {"skipped", st.skipped}, {"warmup", st.warmup},
                     {"target_density", st.target_density}, {"density", st.density}, {"quality", st.quality},
                     {"stages", st.stages}, {"bytes_sent", st.bytes_sent},
                     {"dense_bytes", st.dense_bytes}, {"compress_s", st.compress_seconds},
                     {"comm_s", st.comm_seconds}, {"step_s", st.step_seconds}});
  json j = {
      {"config",
       {{"model", c.model}, {"compressor", c.compressor}, {"ratio", c.ratio},
        {"workers", c.workers}, {"steps", c.steps}, {"epochs", c.epochs},
        {"granularity", c.granularity}, {"bucket_size", c.bucket_size}, {"batch", c.batch},
        {"lr", c.lr}, {"lr_schedule", c.lr_schedule}, {"momentum", c.momentum},
        {"momentum_correction", c.momentum_correction}, {"warmup_steps", c.warmup_steps},
        {"warmup_schedule", c.warmup_schedule}, {"warmup_start_ratio", c.warmup_start_ratio}, {"seed", c.seed}, {"stages", c.stages},
        {"backend", c.backend}, {"bits", c.bits}, {"variance_alpha", c.variance_alpha},
        {"variance_zeta", c.variance_zeta}, {"fft_exponent_bits", c.fft_exponent_bits},
        {"fft_mantissa_bits", c.fft_mantissa_bits}, {"fft_chunk", c.fft_chunk}}},
      {"parameters", r.parameters},
      {"train_examples_per_worker", r.train_examples_per_worker},
      {"steps_run", r.steps.size()},
      {"skipped_steps", r.skipped_steps},
      {"final_loss", r.final_loss},
      {"test_accuracy", r.test_accuracy},
      {"wall_s", r.wall_seconds},
      {"replica_max_diff", r.replica_max_diff},
      {"summary",
       {{"quality_mean", s.quality_mean}, {"quality_p5", s.quality_p5},
        {"quality_p95", s.quality_p95}, {"density_mean", s.density_mean},
        {"bytes_per_step", s.bytes_per_step}, {"dense_bytes_per_step", s.dense_bytes_per_step},
        {"compress_ms_per_step", s.compress_ms_per_step},
        {"comm_ms_per_step", s.comm_ms_per_step}, {"step_ms", s.step_ms}}},
      {"per_step", steps}};
  return j.dump();
}

}  // namespace gs::dist
