#include "gs/distributed/comm.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "gs/base/timing.hpp"
#include "gs/base/error.hpp"

namespace gs::distributed {

struct Communicator::Impl {
  CommOptions opt;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;

  // Waits for a collective; every failure (peer gone, timeout) becomes one gs::Error.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait(opt.timeout);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
      throw Error(std::string("worker ") + std::to_string(opt.rank) + ": " + what +
                  " failed (a peer died, hung past --timeout " + human_duration(double(opt.timeout.count()) / 1000.0) +
                  ", or lost its connection): " + msg);
    }
  }
};

Communicator::Communicator(const CommOptions& o) : impl_(std::make_unique<Impl>()) {
  if (o.world_size < 1) throw Error("world size must be at least 1");
  if (o.rank < 0 || o.rank >= o.world_size)
    throw Error("rank " + std::to_string(o.rank) + " is outside [0, " + std::to_string(o.world_size) + ")");
  if (o.master_port < 1 || o.master_port > 65535)
    throw Error("master port " + std::to_string(o.master_port) + " is outside 1..65535");
  impl_->opt = o;
  try {
    c10d::TCPStoreOptions so;
    so.port = std::uint16_t(o.master_port);
    so.isServer = o.rank == 0 && !o.store_hosted_elsewhere;
    so.waitWorkers = false;
    so.timeout = o.timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>("gradscope", tcp);
    auto popt = c10d::ProcessGroupGloo::Options::create(o.timeout);
    // The interface Gloo binds: GLOO_SOCKET_IFNAME's, as torch.distributed reads it (a worker in a
    // network namespace of its own, scripts/netlab.py); else loopback for a loopback store, else
    // the address the host name resolves to.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    const bool loopback = o.master_addr == "127.0.0.1" || o.master_addr == "localhost";
    popt->devices.push_back(ifname && *ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                            : loopback        ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                              : c10d::ProcessGroupGloo::createDefaultDevice());
    popt->threads = 1;
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, o.rank, o.world_size, popt);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw Error("worker " + std::to_string(o.rank) + " could not join the group at " + o.master_addr + ":" +
                std::to_string(o.master_port) + " within " + human_duration(double(o.timeout.count()) / 1000.0) +
                " (are all " + std::to_string(o.world_size) + " workers started, and the port free?): " + msg);
  }
}

Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->opt.rank; }
int Communicator::world_size() const { return impl_->opt.world_size; }

void Communicator::broadcast(std::vector<float>& values) {
  std::vector<at::Tensor> t = {torch::from_blob(values.data(), {std::int64_t(values.size())}, torch::kFloat32)};
  c10d::BroadcastOptions bo;
  bo.rootRank = 0;
  impl_->wait(impl_->pg->broadcast(t, bo), "broadcast");
}

namespace {

// An in-place c10d view of a host buffer.
template <class T>
at::Tensor view(std::span<T> v, torch::Dtype type) {
  return torch::from_blob(v.data(), {std::int64_t(v.size())}, type);
}

}  // namespace

template <class T>
void Communicator::reduce(std::span<T> values, int op, const char* what) {
  if (values.empty()) return;  // every worker passes the same size, so all skip together
  constexpr torch::Dtype type = std::is_same_v<T, float>          ? torch::kFloat32
                                : std::is_same_v<T, double>       ? torch::kFloat64
                                : std::is_same_v<T, std::int32_t> ? torch::kInt32
                                : std::is_same_v<T, std::int64_t> ? torch::kInt64
                                                                  : torch::kInt8;
  std::vector<at::Tensor> t = {view(values, type)};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp(c10d::ReduceOp::RedOpType(op));
  o.timeout = impl_->opt.timeout;
  impl_->wait(impl_->pg->allreduce(t, o), what);
}

void Communicator::allreduce_max(std::span<float> v) { reduce(v, c10d::ReduceOp::MAX, "all-reduce max"); }
void Communicator::allreduce_min(std::span<std::int8_t> v) { reduce(v, c10d::ReduceOp::MIN, "all-reduce min"); }
void Communicator::allreduce_sum(std::span<std::int8_t> v) { reduce(v, c10d::ReduceOp::SUM, "all-reduce sum"); }
void Communicator::allreduce_sum(std::span<std::int32_t> v) { reduce(v, c10d::ReduceOp::SUM, "all-reduce sum"); }
void Communicator::allreduce_sum(std::span<std::int64_t> v) { reduce(v, c10d::ReduceOp::SUM, "all-reduce sum"); }
void Communicator::allreduce_sum(std::span<float> v) { reduce(v, c10d::ReduceOp::SUM, "all-reduce sum"); }
void Communicator::allreduce_sum(std::span<double> v) { reduce(v, c10d::ReduceOp::SUM, "all-reduce sum"); }

std::vector<std::vector<std::byte>> Communicator::allgather(std::span<const std::byte> mine) {
  const int w = world_size();
  c10d::AllgatherOptions o;
  o.timeout = impl_->opt.timeout;
  // 1. every worker's size
  std::vector<at::Tensor> in = {torch::tensor({std::int64_t(mine.size())}, torch::kInt64)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < w; ++r) out[0].push_back(torch::empty({1}, torch::kInt64));
  impl_->wait(impl_->pg->allgather(out, in, o), "all-gather of sizes");
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(w));
  for (int r = 0; r < w; ++r) sizes[std::size_t(r)] = std::uint64_t(out[0][r].item<std::int64_t>());
  return allgather_known(mine, sizes);
}

std::vector<std::vector<std::byte>> Communicator::allgather_known(std::span<const std::byte> mine,
                                                                  std::span<const std::uint64_t> sizes) {
  const int w = world_size();
  if (int(sizes.size()) != w || sizes[std::size_t(rank())] != mine.size())
    throw Error("all-gather: " + std::to_string(mine.size()) + " bytes of this worker against the sizes known");
  c10d::AllgatherOptions o;
  o.timeout = impl_->opt.timeout;
  std::int64_t largest = 0;
  for (const std::uint64_t s : sizes) largest = std::max(largest, std::int64_t(s));
  // 2. the bytes, padded to the largest size (at least one byte: Gloo wants non-empty buffers)
  const std::int64_t m = std::max<std::int64_t>(largest, 1);
  auto padded = torch::zeros({m}, torch::kUInt8);
  if (!mine.empty()) std::memcpy(padded.data_ptr<std::uint8_t>(), mine.data(), mine.size());
  std::vector<at::Tensor> in2 = {padded};
  std::vector<std::vector<at::Tensor>> out2(1);
  for (int r = 0; r < w; ++r) out2[0].push_back(torch::empty({m}, torch::kUInt8));
  impl_->wait(impl_->pg->allgather(out2, in2, o), "all-gather of payloads");
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(w));
  for (int r = 0; r < w; ++r) {
    const auto* p = reinterpret_cast<const std::byte*>(out2[0][r].data_ptr<std::uint8_t>());
    all[std::size_t(r)].assign(p, p + sizes[std::size_t(r)]);
  }
  return all;
}

std::vector<std::vector<std::byte>> Communicator::alltoall(const std::vector<std::vector<std::byte>>& to_each) {
  const int w = world_size();
  if (int(to_each.size()) != w)
    throw Error("all-to-all: " + std::to_string(to_each.size()) + " parts for " + std::to_string(w) + " workers");
  c10d::AllToAllOptions o;
  o.timeout = impl_->opt.timeout;
  // 1. every part's size, one byte more (Gloo wants no empty part: each carries a byte of padding)
  auto send_sizes = torch::empty({w}, torch::kInt64);
  auto recv_sizes = torch::empty({w}, torch::kInt64);
  const auto parts = static_cast<std::size_t>(w);
  std::vector<std::int64_t> in_counts(parts), out_counts(parts), ones(parts, 1);
  std::int64_t total_in = 0;
  for (int r = 0; r < w; ++r) {
    in_counts[std::size_t(r)] = std::int64_t(to_each[std::size_t(r)].size()) + 1;
    send_sizes.data_ptr<std::int64_t>()[r] = in_counts[std::size_t(r)];
    total_in += in_counts[std::size_t(r)];
  }
  // (c10d takes the split sizes by reference and moves them away: each call gets copies)
  {
    std::vector<std::int64_t> out_split = ones, in_split = ones;
    impl_->wait(impl_->pg->alltoall_base(recv_sizes, send_sizes, out_split, in_split, o), "all-to-all of sizes");
  }
  std::int64_t total_out = 0;
  for (int r = 0; r < w; ++r) {
    out_counts[std::size_t(r)] = recv_sizes.data_ptr<std::int64_t>()[r];
    if (out_counts[std::size_t(r)] < 1)
      throw Error("all-to-all: worker " + std::to_string(r) + " announced a part of " +
                  std::to_string(out_counts[std::size_t(r)] - 1) + " bytes");
    total_out += out_counts[std::size_t(r)];
  }
  // 2. the parts, in rank order
  auto in = torch::zeros({total_in}, torch::kUInt8);
  auto out = torch::empty({total_out}, torch::kUInt8);
  std::int64_t at = 0;
  for (int r = 0; r < w; ++r) {
    const auto& part = to_each[std::size_t(r)];
    if (!part.empty()) std::memcpy(in.data_ptr<std::uint8_t>() + at, part.data(), part.size());
    at += in_counts[std::size_t(r)];
  }
  {
    std::vector<std::int64_t> out_split = out_counts, in_split = in_counts;
    impl_->wait(impl_->pg->alltoall_base(out, in, out_split, in_split, o), "all-to-all of payloads");
  }
  std::vector<std::vector<std::byte>> from(parts);
  at = 0;
  for (int r = 0; r < w; ++r) {
    const auto* p = reinterpret_cast<const std::byte*>(out.data_ptr<std::uint8_t>() + at);
    from[std::size_t(r)].assign(p, p + (out_counts[std::size_t(r)] - 1));
    at += out_counts[std::size_t(r)];
  }
  return from;
}

void Communicator::barrier() {
  // A one-element all-reduce: Gloo's barrier takes no timeout of its own in every version.
  std::vector<float> one = {1.0f};
  allreduce_sum(std::span<float>(one));
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("could not open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error("could not find a free loopback port");
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace gs::distributed
