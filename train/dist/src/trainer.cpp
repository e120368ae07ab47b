#include "gs/dist/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <thread>

#include "gs/compress/model_compressor.hpp"
#include "gs/dist/comm.hpp"
#include "gs/dist/launcher.hpp"
#include "gs/dist/torch_adapter.hpp"
#include "gs/base/quantile.hpp"
#include "gs/base/timing.hpp"
#include "gs/error.hpp"
#include "gs/train/dataset.hpp"
#include "gs/train/models.hpp"
#include "gs/train/per_sample.hpp"
#include "gs/train/recorder.hpp"
#include "gs/train/threads.hpp"

namespace gs::dist {

namespace {


struct Fault {
  int rank = -1;
  std::int64_t step = -1;
  std::string action;
};

std::optional<Fault> fault_from_env() {
  const char* v = std::getenv("GS_DIST_FAULT");
  if (!v || !*v) return std::nullopt;
  Fault f;
  std::string s = v;
  std::size_t at = 0;
  while (at <= s.size()) {
    const auto end = std::min(s.find(',', at), s.size());
    const std::string kv = s.substr(at, end - at);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw Error("GS_DIST_FAULT: expected key=value, got '" + kv + "'");
    const std::string k = kv.substr(0, eq), val = kv.substr(eq + 1);
    if (k == "rank") f.rank = std::stoi(val);
    else if (k == "step") f.step = std::stoll(val);
    else if (k == "action") f.action = val;
    else throw Error("GS_DIST_FAULT: unknown key '" + k + "'");
    at = end + 1;
  }
  if (f.action != "exit" && f.action != "hang" && f.action != "nan")
    throw Error("GS_DIST_FAULT: action must be exit, hang or nan");
  return f;
}

constexpr int kMaxSkippedInARow = 10;

}  // namespace

TrainSummary summarize(const TrainResult& r) {
  TrainSummary s;
  std::vector<double> q;
  double n = 0;
  for (const auto& st : r.steps) {
    if (st.skipped) continue;
    if (!st.warmup) q.push_back(st.quality);  // quality describes the steps at --ratio
    s.density_mean += st.density;
    s.bytes_per_step += double(st.bytes_sent);
    s.dense_bytes_per_step += double(st.dense_bytes);
    s.compress_ms_per_step += st.compress_seconds * 1e3;
    s.comm_ms_per_step += st.comm_seconds * 1e3;
    s.step_ms += st.step_seconds * 1e3;
    n += 1;
  }
  if (n == 0) return s;
  for (double v : q) s.quality_mean += v;
  if (!q.empty()) s.quality_mean /= double(q.size());
  s.quality_p5 = q.empty() ? 0.0 : quantile(q, 0.05);
  s.quality_p95 = q.empty() ? 0.0 : quantile(q, 0.95);
  s.density_mean /= n;
  s.bytes_per_step /= n;
  s.dense_bytes_per_step /= n;
  s.compress_ms_per_step /= n;
  s.comm_ms_per_step /= n;
  s.step_ms /= n;
  return s;
}

TrainResult train_worker(const TrainConfig& config, const StepCallback& on_step) {
  config.validate();
  const auto t_start = Clock::now();
  const int world = config.workers;
  const int rank = std::max(config.rank, 0);
  const auto fault = fault_from_env();
  // Each worker is one process on a shared machine: one compute thread each (libtorch's and the
  // BLAS pool's, so a seed gives the same run whatever OMP_NUM_THREADS says).
  train::set_compute_threads(1);

  std::unique_ptr<Communicator> comm;
  if (world > 1) {
    CommOptions co;
    co.rank = rank;
    co.world_size = world;
    co.master_addr = config.master_addr;
    co.master_port = config.master_port;
    co.store_hosted_elsewhere = std::getenv(kStoreHostedEnv) != nullptr;
    co.timeout = std::chrono::milliseconds(std::int64_t(config.timeout * 1000));
    comm = std::make_unique<Communicator>(co);
    comm->check_same_config(config.shared_description());
  }

  // Model: same seed everywhere, then rank 0's values broadcast so replicas start equal anyway.
  torch::manual_seed(config.seed);
  auto model = train::make_model(config.model);
  std::vector<float> flat;
  if (comm) {
    flatten_params(*model, flat);
    comm->broadcast(flat);
    assign_params(*model, flat);
  }
  compress::ModelCompressor mc(
      tensor_specs(*model), compress::parse_granularity(config.granularity), config.bucket_size,
      compress::make_compressor(config.compressor, config.ratio, config.compressor_options(rank)));
  // Variance-based compression weighs each element by its per-sample gradient variance, which the
  // model's forward/backward yields when a GradientVariance is attached (gs/train/per_sample.hpp).
  std::optional<train::GradientVariance> grad_variance;
  if (mc.compressor().needs_gradient_variance()) grad_variance.emplace(*model);
  // With momentum correction the velocity lives in the compressor, before sparsification; the
  // optimizer then applies the mean update as it is.
  if (config.momentum_correction) mc.set_momentum_correction(config.momentum);
  // Dense warm-up: the first --warmup-steps steps exchange the gradient uncompressed (the
  // compressor's residual starts empty when it takes over). An exponential warm-up runs the
  // compressor itself at TrainConfig::ratio_at's falling ratio.
  compress::ModelCompressor dense(tensor_specs(*model), compress::Granularity::model, 0,
                                  compress::make_compressor("none", 1.0));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(config.lr).momentum(
                                                 config.momentum_correction ? 0.0 : config.momentum));

  // Data: a fixed permutation of the training set, cut into `world` equal shards.
  const auto train_set = train::fashion_mnist_tensors("train");
  const std::int64_t shard = train_set.size() / world;
  if (shard < config.batch)
    throw Error("each worker's shard (" + std::to_string(shard) + " examples) is smaller than --batch");
  auto gen = at::detail::createCPUGenerator(config.seed);
  const auto perm = torch::randperm(train_set.size(), gen, torch::kInt64);
  const auto my_idx = perm.slice(0, rank * shard, (rank + 1) * shard);
  const std::int64_t per_epoch = shard / config.batch;
  std::int64_t total = per_epoch * config.epochs;
  if (config.steps > 0) total = std::min(total, config.steps);

  std::optional<train::GradientRecorder> recorder;
  if (!config.record.empty() && rank == 0) {
    data::SnapshotMeta meta;
    meta.model = config.model;
    meta.dataset = "fashion-mnist";
    meta.seed = config.seed;
    data::WriterOptions wo;
    wo.force = config.force;
    recorder.emplace(*model, data::SnapshotWriter(config.record, meta,
                                                  train::parameter_layers(*model), wo));
  }

  TrainResult result;
  result.parameters = mc.numel();
  result.train_examples_per_worker = shard;
  std::vector<float> grad, update(mc.numel());
  int skipped_in_a_row = 0;
  std::int64_t step = 0;
  for (int epoch = 0; epoch < config.epochs && step < total; ++epoch) {
    auto egen = at::detail::createCPUGenerator(config.seed * 7919 + std::uint64_t(epoch) * 31 +
                                               std::uint64_t(rank));
    const auto order = my_idx.index_select(0, torch::randperm(shard, egen, torch::kInt64));
    for (std::int64_t b = 0; b < per_epoch && step < total; ++b, ++step) {
      const auto t_step = Clock::now();
      if (fault && fault->rank == rank && fault->step == step) {
        if (fault->action == "exit") std::_Exit(7);
        if (fault->action == "hang")
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      const auto idx = order.slice(0, b * config.batch, (b + 1) * config.batch);
      const auto x = train_set.images.index_select(0, idx);
      const auto y = train_set.labels.index_select(0, idx);
      const double lr = config.lr_at(step, total);
      for (auto& group : opt.param_groups())
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      model->train();
      opt.zero_grad();
      if (recorder) recorder->begin_step(step);
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      const double local_loss = loss.item<double>();
      if (recorder) recorder->end_step(local_loss, lr);
      flatten_grads(*model, grad);
      if (fault && fault->rank == rank && fault->step == step && fault->action == "nan")
        grad[grad.size() / 2] = std::nanf("");

      StepReport rep;
      rep.step = step;
      rep.epoch = epoch;
      rep.lr = lr;
      rep.warmup = config.warmup_at(step);
      // Only an exponential warm-up moves the compressor's ratio (back to --ratio after it).
      const bool uncompressed = rep.warmup && !config.exponential_warmup();
      if (config.exponential_warmup()) mc.set_density(config.ratio_at(step));
      rep.target_density = uncompressed ? 1.0 : mc.compressor().density();
      // One small all-reduce carries the non-finite flag and the loss.
      std::vector<double> flags = {0.0, local_loss};
      for (float v : grad)
        if (!std::isfinite(v)) {
          flags[0] = 1.0;
          break;
        }
      const auto t_comm0 = Clock::now();
      if (comm) comm->allreduce_sum(flags);
      rep.comm_seconds = seconds_since(t_comm0);
      rep.loss = flags[1] / world;
      if (flags[0] > 0) {
        // Policy: skip everywhere, keep the residual as it was, count it.
        rep.skipped = true;
        ++result.skipped_steps;
        if (++skipped_in_a_row >= kMaxSkippedInARow)
          throw Error("gradients were NaN or Inf for " + std::to_string(kMaxSkippedInARow) +
                      " steps in a row (last at step " + std::to_string(step) +
                      "); lower --lr or check the data");
      } else {
        skipped_in_a_row = 0;
        // Every exchange kind (all-gather, all-reduce, the compressor's own collectives) in one call.
        compress::SoloCollectives solo;
        compress::Collectives& collectives = comm ? static_cast<compress::Collectives&>(*comm) : solo;
        if (grad_variance && !uncompressed) mc.set_gradient_variance(grad_variance->compute());
        compress::StepStats st;
        (uncompressed ? dense : mc).step(grad, collectives, update, &st);
        rep.comm_seconds += st.comm_seconds;
        assign_grads(*model, update);
        opt.step();
        rep.density = st.density();
        rep.quality = st.quality();
        rep.target_density = st.target_density;
        rep.stages = st.stages;
        rep.bytes_sent = st.bytes_sent;
        rep.dense_bytes = st.dense_bytes;
        rep.compress_seconds = st.compress_seconds;
      }
      rep.step_seconds = seconds_since(t_step);
      result.steps.push_back(rep);
      if (on_step && rank == 0) on_step(rep, total);
    }
  }
  if (recorder) recorder->finish();
  if (!result.steps.empty()) result.final_loss = result.steps.back().loss;

  // Replicas must agree: compare with rank 0's parameters.
  flatten_params(*model, flat);
  if (comm) {
    std::vector<float> ref = flat;
    comm->broadcast(ref);
    double diff = 0.0;
    for (std::size_t i = 0; i < flat.size(); ++i)
      diff = std::max(diff, double(std::fabs(flat[i] - ref[i])));
    std::vector<double> d = {diff};
    // The sum of non-negative differences is zero exactly when all are.
    comm->allreduce_sum(d);
    result.replica_max_diff = d[0];
  }

  if (rank == 0) {
    torch::NoGradGuard ng;
    model->eval();
    const auto test = train::fashion_mnist_tensors("test");
    std::int64_t correct = 0;
    for (std::int64_t at = 0; at < test.size(); at += 1000) {
      const auto end = std::min(at + 1000, test.size());
      const auto pred = model->forward(test.images.slice(0, at, end)).argmax(1);
      correct += pred.eq(test.labels.slice(0, at, end)).sum().item<std::int64_t>();
    }
    result.test_accuracy = double(correct) / double(test.size());
  }
  if (comm) comm->barrier();  // rank 0's evaluation ends the run for everybody
  result.wall_seconds = seconds_since(t_start);
  return result;
}

}  // namespace gs::dist
