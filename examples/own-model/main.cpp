// own_model: trains a small residual CNN (defined here, not one of gradscope's models) on
// Fashion-MNIST, data-parallel over c10d Gloo, with its gradients compressed by a gradscope
// compressor chosen by name (error feedback, all workers exchanging through gs::distributed's Gloo
// communicator), and rank 0's gradients recorded to a gradscope snapshot.
//
//   own_model --rank R --world W --port P [--steps N] [--batch B] [--lr 0.01]
//             [--compressor sidco-e] [--ratio 0.05] [--record FILE.h5]
// Start one process per rank (the same options on each); rank 0 hosts the rendezvous store.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gs/compress/model_compressor.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/distributed/comm.hpp"
#include "gs/distributed/torch_adapter.hpp"
#include "gs/base/error.hpp"
#include "gs/train/dataset.hpp"
#include "gs/train/models.hpp"
#include "gs/train/recorder.hpp"
#include "gs/train/threads.hpp"

namespace {

// conv-bn-relu-conv-bn plus the input, then relu: the block of a residual network.
struct ResidualBlockImpl : torch::nn::Module {
  explicit ResidualBlockImpl(int channels)
      : conv1(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(channels))),
        conv2(register_module(
            "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(channels))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1(conv1(x)));
    return torch::relu(bn2(conv2(y)) + x);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
};
TORCH_MODULE(ResidualBlock);

struct ResNetSmallImpl : torch::nn::Module {
  ResNetSmallImpl()
      : stem(register_module("stem", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        block1(register_module("block1", ResidualBlock(16))),
        block2(register_module("block2", ResidualBlock(16))),
        head(register_module("head", torch::nn::Linear(16 * 7 * 7, 10))) {}
  torch::Tensor forward(const torch::Tensor& images) {
    auto x = torch::relu(stem(images));
    x = torch::max_pool2d(block1(x), 2);  // 16 x 14 x 14
    x = torch::max_pool2d(block2(x), 2);  // 16 x 7 x 7
    return head(x.flatten(1));
  }
  torch::nn::Conv2d stem;
  ResidualBlock block1, block2;
  torch::nn::Linear head;
};
TORCH_MODULE(ResNetSmall);

struct Options {
  int rank = -1, world = 1, port = 0;
  std::int64_t steps = 100, batch = 64;
  std::string compressor = "sidco-e";
  double density = 0.05;
  double lr = 0.01;
  std::string record;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw gs::Error("option " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--rank")
      o.rank = std::stoi(v);
    else if (a == "--world")
      o.world = std::stoi(v);
    else if (a == "--port")
      o.port = std::stoi(v);
    else if (a == "--steps")
      o.steps = std::stoll(v);
    else if (a == "--batch")
      o.batch = std::stoll(v);
    else if (a == "--compressor")
      o.compressor = v;
    else if (a == "--ratio")
      o.density = std::stod(v);
    else if (a == "--lr")
      o.lr = std::stod(v);
    else if (a == "--record")
      o.record = v;
    else
      throw gs::Error("unknown option " + a);
  }
  if (o.rank < 0 || o.port <= 0) throw gs::Error("give --rank and --port (and --world)");
  return o;
}

double test_accuracy(ResNetSmall& model, const gs::train::TensorDataset& test, std::int64_t count) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto logits = model->forward(test.images.slice(0, 0, count));
  const auto right = logits.argmax(1).eq(test.labels.slice(0, 0, count)).sum().item<std::int64_t>();
  model->train();
  return double(right) / double(count);
}

int run(const Options& o) {
  gs::train::set_compute_threads(1);
  gs::distributed::CommOptions co;
  co.rank = o.rank;
  co.world_size = o.world;
  co.master_port = o.port;
  co.timeout = std::chrono::milliseconds(60000);
  gs::distributed::Communicator comm(co);

  // Same initialisation everywhere, then rank 0's values broadcast.
  torch::manual_seed(1);
  ResNetSmall model;
  std::vector<float> flat;
  gs::distributed::flatten_params(*model, flat);
  comm.broadcast(flat);
  gs::distributed::assign_params(*model, flat);

  // The compressor by name over the whole model flattened (one residual), every exchange kind
  // behind step().
  gs::compress::CompressorOptions copt;
  copt.seed = 1000 + std::uint64_t(o.rank);
  gs::compress::ModelCompressor mc(gs::distributed::tensor_specs(*model), gs::compress::Granularity::model, 0,
                                   gs::compress::make_compressor(o.compressor, o.density, copt));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(0.9));

  std::optional<gs::train::GradientRecorder> recorder;
  if (o.rank == 0 && !o.record.empty()) {
    gs::data::SnapshotMeta meta;
    meta.model = "resnet-small";
    meta.dataset = "fashion-mnist";
    meta.seed = 1;
    recorder.emplace(*model, gs::data::SnapshotWriter(o.record, meta, gs::train::parameter_layers(*model)),
                     gs::train::RecorderOptions{.every = 5});
  }

  // This worker's shard: every world-th image.
  const auto train = gs::train::fashion_mnist_tensors("train");
  const auto mine = torch::arange(o.rank, train.size(), o.world, torch::kInt64);
  const std::int64_t per_epoch = mine.size(0) / o.batch;
  std::vector<float> grad, update(mc.numel());
  double sent = 0, dense = 0;
  for (std::int64_t step = 0; step < o.steps; ++step) {
    const std::int64_t at = (step % per_epoch) * o.batch;
    const auto idx = mine.slice(0, at, at + o.batch);
    opt.zero_grad();
    if (recorder) recorder->begin_step(step);
    const auto loss = torch::nn::functional::cross_entropy(model->forward(train.images.index_select(0, idx)),
                                                           train.labels.index_select(0, idx));
    loss.backward();
    if (recorder) recorder->end_step(loss.item<double>(), o.lr);
    gs::distributed::flatten_grads(*model, grad);
    gs::compress::StepStats stats;
    mc.step(grad, comm, update, &stats);
    gs::distributed::assign_grads(*model, update);
    opt.step();
    sent += double(stats.bytes_sent);
    dense += double(stats.dense_bytes);
    if (o.rank == 0 && (step % 10 == 0 || step + 1 == o.steps))
      std::printf("step %lld loss %.4f density %.4f quality %.3f\n", (long long)step, loss.item<double>(),
                  stats.density(), stats.quality());
  }
  if (recorder) recorder->finish();

  // Replicas agree when every worker's parameters equal rank 0's exactly.
  gs::distributed::flatten_params(*model, flat);
  std::vector<float> ref = flat;
  comm.broadcast(ref);
  std::vector<float> differs = {flat == ref ? 0.0f : 1.0f};
  comm.allreduce_sum(std::span<float>(differs));
  if (o.rank == 0) {
    std::printf("sent %.4f of the dense bytes with %s at density %g\n", sent / dense, o.compressor.c_str(), o.density);
    std::printf("test accuracy %.2f%% on 1000 images\n",
                100.0 * test_accuracy(model, gs::train::fashion_mnist_tensors("test"), 1000));
    std::printf("replicas agree: %s\n", differs[0] == 0.0f ? "yes" : "NO");
  }
  return differs[0] == 0.0f ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "own_model: error: %s\n", e.what());
    return 1;
  }
}
