// One worker of compressed data-parallel training, in its phases: join the group, build the model
// and its compressor, load the data, run the steps, finish (replica check and evaluation).
#include "gs/distributed/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "gs/base/join.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/base/timing.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/step_rules.hpp"
#include "gs/distributed/checkpoint.hpp"
#include "gs/distributed/comm.hpp"
#include "gs/distributed/launcher.hpp"
#include "gs/distributed/torch_adapter.hpp"
#include "gs/base/error.hpp"
#include "gs/train/loop.hpp"
#include "gs/train/per_sample.hpp"
#include "gs/train/recorder.hpp"
#include "gs/train/threads.hpp"
#include "worker_state.hpp"

namespace gs::distributed {

namespace {

struct Fault {
  int rank = -1;
  std::int64_t step = -1;
  std::string action;
  int attempt = 0;  // the launcher's attempt it fires in (restarts count up from 0; -1: every one)
};

std::optional<Fault> fault_from_env() {
  const char* v = std::getenv("GS_DIST_FAULT");
  if (!v || !*v) return std::nullopt;
  Fault f;
  for (std::string_view item : split_list(v)) {
    const std::string kv(item);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw Error("GS_DIST_FAULT: expected key=value, got '" + kv + "'");
    const std::string k = kv.substr(0, eq), val = kv.substr(eq + 1);
    if (k == "rank")
      f.rank = std::stoi(val);
    else if (k == "step")
      f.step = std::stoll(val);
    else if (k == "action")
      f.action = val;
    else if (k == "attempt")
      f.attempt = val == "any" ? -1 : std::stoi(val);
    else
      throw Error("GS_DIST_FAULT: unknown key '" + k + "'");
  }
  if (f.action != "exit" && f.action != "kill" && f.action != "hang" && f.action != "nan" &&
      f.action != "kill-in-checkpoint")
    throw Error("GS_DIST_FAULT: action must be exit, kill, hang, nan or kill-in-checkpoint");
  const char* attempt = std::getenv(kAttemptEnv);
  if (f.attempt >= 0 && f.attempt != (attempt ? std::atoi(attempt) : 0)) return std::nullopt;
  return f;
}

bool any_nonfinite(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
}

double squared_norm(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += double(x) * double(x);
  return s;
}

// Everything one worker holds during a run, built phase by phase.
class Worker {
 public:
  explicit Worker(const TrainConfig& config)
      : config_(config), world_(config.workers), rank_(std::max(config.rank, 0)), fault_(fault_from_env()) {}

  TrainResult run(const StepCallback& on_step) {
    join();
    build();
    load_data();
    if (!config_.resume.empty()) restore();
    steps(on_step);
    finish();
    return std::move(result_);
  }

 private:
  // The group: a communicator when there is more than one worker, and the check that every
  // worker runs the same configuration.
  void join() {
    if (world_ == 1) return;
    CommOptions co;
    co.rank = rank_;
    co.world_size = world_;
    co.master_addr = config_.master_addr;
    co.master_port = config_.master_port;
    co.store_hosted_elsewhere = std::getenv(kStoreHostedEnv) != nullptr;
    co.timeout = std::chrono::milliseconds(std::int64_t(config_.timeout * 1000));
    comm_ = std::make_unique<Communicator>(co);
    compress::agree_settings(*comm_, config_.shared_settings(), "start every worker with the same options");
  }

  compress::Collectives& collectives() { return comm_ ? static_cast<compress::Collectives&>(*comm_) : solo_; }

  // The model (same seed everywhere, then rank 0's values broadcast, so replicas start equal), its
  // compressor with error feedback, the optimizer and, on rank 0, the gradient recorder.
  void build() {
    torch::manual_seed(config_.seed);
    model_ = train::make_model(config_.model);
    std::vector<float> flat;
    if (comm_) {
      flatten_params(*model_, flat);
      comm_->broadcast(flat);
      assign_params(*model_, flat);
    }
    mc_.emplace(
        tensor_specs(*model_), compress::parse_granularity(config_.granularity), config_.bucket_size,
        compress::make_compressor(config_.compressor, config_.run_density(), config_.compressor_options(rank_)));
    // Variance-based compression weighs each element by its per-sample gradient variance, which
    // the model's forward/backward yields when a GradientVariance is attached.
    if (mc_->compressor().needs_gradient_variance()) grad_variance_.emplace(*model_);
    // With momentum correction the velocity lives in the compressor, before sparsification; the
    // optimizer then applies the mean update as it is.
    if (config_.momentum_correction) mc_->set_momentum_correction(config_.momentum);
    mc_->set_exchange(compress::exchange_mode(config_.exchange, "--exchange"));
    // Dense steps (the dense warm-up, ratio 1, --compress-when auto) run mc_ with a dense plan: the
    // whole accumulator all-reduced. An exponential warm-up runs the compressor itself at
    // TrainConfig::density_at's falling density. The dense exchange's own compressor, stateless,
    // keeps its place in the checkpoints (their layout).
    dense_.emplace(tensor_specs(*model_), compress::Granularity::model, 0, compress::make_compressor("none", 1.0));
    opt_.emplace(model_->parameters(),
                 torch::optim::SGDOptions(config_.lr).momentum(config_.momentum_correction ? 0.0 : config_.momentum));
    if (!config_.record.empty() && rank_ == 0) {
      data::WriterOptions wo;
      wo.force = config_.force;
      recorder_.emplace(*model_, train::fashion_mnist_snapshot(config_.record, config_.model, config_.seed,
                                                               train::parameter_layers(*model_), wo));
    }
    result_.parameters = mc_->numel();
  }

  // The data: a fixed permutation of the training set cut into `world` equal shards; each epoch
  // walks this worker's shard in a new order.
  void load_data() {
    train_set_ = train::fashion_mnist_tensors("train");
    const std::int64_t shard = train_set_.size() / world_;
    if (shard < config_.batch)
      throw Error("each worker's shard (" + std::to_string(shard) + " examples) is smaller than --batch");
    auto gen = at::detail::createCPUGenerator(config_.seed);
    const auto perm = torch::randperm(train_set_.size(), gen, torch::kInt64);
    const std::uint64_t seed = config_.seed, rank = std::uint64_t(rank_);
    batches_.emplace(train_set_, perm.slice(0, rank_ * shard, (rank_ + 1) * shard), config_.batch,
                     [seed, rank, shard](int epoch) {
                       auto egen = at::detail::createCPUGenerator(seed * 7919 + std::uint64_t(epoch) * 31 + rank);
                       return torch::randperm(shard, egen, torch::kInt64);
                     });
    total_ = batches_->per_epoch() * config_.epochs;
    if (config_.steps > 0) total_ = std::min(total_, config_.steps);
    result_.train_examples_per_worker = shard;
  }

  // The steps from start_ (0, or where the checkpoint resumed) to the end; a checkpoint every
  // --checkpoint-every steps, except after the last.
  void steps(const StepCallback& on_step) {
    const std::int64_t per_epoch = batches_->per_epoch();
    for (std::int64_t step = start_; step < total_; ++step) {
      const StepReport rep = one_step(int(step / per_epoch), step % per_epoch, step);
      result_.steps.push_back(rep);
      if (on_step && rank_ == 0) on_step(rep, total_);
      const std::int64_t done = step + 1;
      if (config_.checkpoint_every > 0 && done % config_.checkpoint_every == 0 && done < total_) save_checkpoint(done);
    }
    if (recorder_) recorder_->finish();
    if (!result_.steps.empty()) result_.final_loss = result_.steps.back().loss;
  }

  void inject_fault(std::int64_t step) {
    if (!fault_ || fault_->rank != rank_ || fault_->step != step) return;
    if (fault_->action == "exit") std::_Exit(7);
    if (fault_->action == "kill") std::raise(SIGKILL);
    if (fault_->action == "hang")
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  // One step: the batch step, the agreement on skipping (a non-finite gradient anywhere skips the
  // step everywhere: no residual update, no optimizer step), the exchange and the update.
  StepReport one_step(int epoch, std::int64_t b, std::int64_t step) {
    const auto t_step = Clock::now();
    inject_fault(step);
    StepReport rep;
    rep.step = step;
    rep.epoch = epoch;
    rep.lr = config_.lr_at(step, total_);
    for (auto& group : opt_->param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(rep.lr);
    const train::Batch batch = batches_->get(epoch, b);
    opt_->zero_grad();
    if (recorder_) recorder_->begin_step(step);
    const double local_loss = train::forward_backward(*model_, batch);
    if (recorder_) recorder_->end_step(local_loss, rep.lr);
    flatten_grads(*model_, grad_);
    if (fault_ && fault_->rank == rank_ && fault_->step == step && fault_->action == "nan")
      grad_[grad_.size() / 2] = std::nanf("");

    const bool warmup = warmup_.warmup_at(step);
    // An exponential warm-up and the density schedule move the compressor's density (the
    // schedule's after the warm-up; --ratio after both).
    if (regimes_.moves_density(warmup_)) mc_->set_density(regimes_.density_at(warmup_, step));
    if (gate_.choice_due()) {  // --compress-when auto: the same choice on every worker
      std::vector<float> times = gate_.times();
      if (comm_) comm_->allreduce_max(times);
      gate_.choose(step, times);
    }
    const bool uncompressed = compress::sends_dense(warmup_, step, mc_->compressor().density(),
                                                    compress::density_based(config_.compressor)) ||
                              (!warmup && gate_.dense_at(step));
    // One small all-reduce carries the non-finite flag, the loss and, for the density schedule,
    // the squared gradient norm: its sum over the workers, the same on every worker.
    std::vector<double> flags = {any_nonfinite(grad_) ? 1.0 : 0.0, local_loss,
                                 regimes_.on() ? squared_norm(grad_) : 0.0};
    const auto t_comm0 = Clock::now();
    if (comm_) comm_->allreduce_sum(flags);
    const double agreement_seconds = seconds_since(t_comm0);
    rep.loss = flags[1] / world_;
    const bool skipped = flags[0] > 0;
    regimes_.add(skipped, flags[2]);  // sums over the workers already: decided without a round
    if (regimes_.due(step)) regimes_.decide(regimes_.interval_sum());
    skip_.record(skipped, step, "lower --lr or check the data");
    result_.skipped_steps = skip_.skipped();
    compress::StepStats& st = rep.stats;
    if (!skipped) {
      if (grad_variance_ && !uncompressed) mc_->set_gradient_variance(grad_variance_->compute());
      update_.resize(mc_->numel());
      mc_->step(grad_, collectives(), update_, &st, {step, uncompressed});
      gate_.add(step, uncompressed, st.compress_seconds + st.comm_seconds);
      assign_grads(*model_, update_);
      opt_->step();
      if (!uncompressed && !warmup && st.target_density < 1.0) {
        const std::string w = density_watch_.add(st.quality());
        if (!w.empty() && rank_ == 0) std::fprintf(stderr, "gradscope train: warning: %s\n", w.c_str());
      }
    } else {
      st.target_density = uncompressed ? 1.0 : mc_->compressor().density();
    }
    st.skipped = skipped;
    st.warmup = warmup;
    st.dense = uncompressed;
    st.critical = regimes_.critical_at(warmup_, step);
    st.comm_seconds += agreement_seconds;
    rep.step_seconds = seconds_since(t_step);
    return rep;
  }

  // Replicas must agree: every worker compares its parameters with rank 0's. Then rank 0
  // evaluates on the test set, which ends the run for everybody.
  void finish() {
    std::vector<float> flat;
    flatten_params(*model_, flat);
    if (comm_) {
      std::vector<float> ref = flat;
      comm_->broadcast(ref);
      double diff = 0.0;
      for (std::size_t i = 0; i < flat.size(); ++i) diff = std::max(diff, double(std::fabs(flat[i] - ref[i])));
      std::vector<double> d = {diff};
      // The sum of non-negative differences is zero exactly when all are.
      comm_->allreduce_sum(d);
      result_.replica_max_diff = d[0];
    }
    if (rank_ == 0) {
      result_.param_digest =
          sha256_hex(std::string_view(reinterpret_cast<const char*>(flat.data()), flat.size() * sizeof(float)));
      result_.test_accuracy = train::evaluate(*model_, train::fashion_mnist_tensors("test"));
    }
    if (comm_) comm_->barrier();
  }

  // This worker's whole state after `done` steps (docs/training.md, "Checkpoints").
  std::string state(std::int64_t done) const {
    StateWriter w;
    w.put<std::int32_t>(world_);
    w.put<std::int32_t>(rank_);
    w.put(done);
    w.put(batches_->per_epoch());
    w.put_text(torch_state(*model_, *opt_));
    mc_->save_state(w);
    dense_->save_state(w);
    skip_.save_state(w);
    regimes_.save_state(w);
    save_reports(w, result_.steps);
    // Newer than the rest: a checkpoint that ends before them is of an earlier version.
    gate_.save_state(w);
    w.put<std::uint64_t>(result_.steps.size());
    for (const auto& st : result_.steps) w.put<std::uint8_t>(st.stats.dense);
    return w.take();
  }

  // Every worker writes its file; once all have (a barrier), the manifest marks the checkpoint
  // complete, and once this worker's file of it reads back whole, older ones go.
  void save_checkpoint(std::int64_t done) {
    CheckpointInfo info;
    info.dir = checkpoint_dir(config_.checkpoint, done);
    info.step = done;
    info.workers = world_;
    info.model = config_.model;
    info.compressor = config_.compressor;
    info.description = config_.shared_description();
    std::filesystem::create_directories(info.dir);
    const std::string payload = state(done);
    if (fault_ && fault_->rank == rank_ && fault_->step == done && fault_->action == "kill-in-checkpoint")
      die_writing(rank_file(info.dir, rank_), payload);
    write_rank_state(info.dir, rank_, payload);
    if (comm_) comm_->barrier();
    write_manifest(info);
    (void)read_rank_state(info.dir, rank_);  // gs::Error naming the file unless it verifies
    const auto latest = latest_checkpoint(config_.checkpoint);
    if (!latest || latest->step != done)
      throw Error("checkpoint " + info.dir.string() + " does not read back as the latest one");
    prune_checkpoints(config_.checkpoint, rank_, config_.keep_checkpoints);
  }

  // The fault hook's kill in the middle of a checkpoint: half of this worker's file written under
  // its temporary name, then SIGKILL, as a machine that goes down mid-write leaves it.
  [[noreturn]] static void die_writing(const std::filesystem::path& file, const std::string& payload) {
    std::ofstream(temporary_path(file), std::ios::binary).write(payload.data(), std::streamsize(payload.size() / 2));
    std::raise(SIGKILL);
    std::_Exit(9);
  }

  void restore() {
    // Where the run started, the files were verified; here this worker reads (and checks) its own.
    const CheckpointInfo info = matching_checkpoint(config_.resume, config_);
    const std::string bytes = read_rank_state(info.dir, rank_);
    StateReader r(bytes, "checkpoint " + info.dir.string() + " (rank " + std::to_string(rank_) + ")");
    r.expect(r.get<std::int32_t>(), std::int32_t(world_), "the world size");
    r.expect(r.get<std::int32_t>(), std::int32_t(rank_), "the rank");
    start_ = r.get<std::int64_t>();
    r.expect(start_, info.step, "the step");
    r.expect(r.get<std::int64_t>(), batches_->per_epoch(), "the number of batches per epoch");
    if (start_ < 0 || start_ > total_) r.fail("its step lies outside this run's steps");
    load_torch_state(r, r.get_text(), *model_, *opt_);
    mc_->load_state(r);
    dense_->load_state(r);
    skip_.load_state(r);
    regimes_.load_state(r);
    result_.skipped_steps = skip_.skipped();
    result_.steps = load_reports(r);
    if (!r.at_end()) {
      gate_.load_state(r);
      if (r.get<std::uint64_t>() != result_.steps.size()) r.fail("its steps' dense flags do not match its steps");
      for (auto& st : result_.steps) st.stats.dense = r.get<std::uint8_t>() != 0;
    } else if (gate_.on()) {
      r.fail("was written by a version without --compress-when: resume it without");
    }
    if (!r.at_end()) r.fail("has bytes after its state");
    result_.resumed_from = start_;
  }

  const TrainConfig& config_;
  const int world_, rank_;
  const std::optional<Fault> fault_;
  std::unique_ptr<Communicator> comm_;
  compress::SoloCollectives solo_;
  std::shared_ptr<train::Classifier> model_;
  std::optional<compress::ModelCompressor> mc_, dense_;
  std::optional<train::GradientVariance> grad_variance_;
  std::optional<torch::optim::SGD> opt_;
  std::optional<train::GradientRecorder> recorder_;
  train::TensorDataset train_set_;
  std::optional<train::EpochBatches> batches_;
  const compress::WarmupSchedule warmup_ = config_.warmup();
  compress::RegimeDetector regimes_{config_.schedule()};
  compress::CompressionGate gate_{compress::CompressionGate::parse(config_.compress_when),
                                  config_.compress_when_interval};
  compress::DensityWatch density_watch_;
  std::int64_t total_ = 0, start_ = 0;
  compress::SkipRule skip_;
  std::vector<float> grad_, update_;
  TrainResult result_;
};

}  // namespace

TrainResult train_worker(const TrainConfig& config, const StepCallback& on_step) {
  config.validate();
  const Stopwatch wall;
  // Each worker is one process on a shared machine: one compute thread each (libtorch's and the
  // BLAS pool's, so a seed gives the same run whatever OMP_NUM_THREADS says).
  train::set_compute_threads(1);
  TrainResult result = Worker(config).run(on_step);
  result.wall_seconds = wall.seconds();
  return result;
}

}  // namespace gs::distributed
