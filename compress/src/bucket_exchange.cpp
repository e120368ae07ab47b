// The bucket exchanges by name (bucket_exchange.hpp).
#include "bucket_exchange.hpp"

#include <string>

#include "gs/base/error.hpp"

namespace gs::compress::detail {

std::unique_ptr<BucketExchange> make_dense_exchange();
std::unique_ptr<BucketExchange> make_allgather_exchange();
std::unique_ptr<BucketExchange> make_own_rounds_exchange();
std::unique_ptr<BucketExchange> make_shared_exchange();
std::unique_ptr<BucketExchange> make_sparse_allreduce_exchange();

bool BucketExchange::device(BucketWork&, const DeviceBucket& b, TimedCollectives&, DeviceCollectives*, StepStats&) {
  throw Error("bucket " + std::to_string(b.index) + ": the " + std::string(name()) +
              " exchange runs on the host; this bucket lies on a device (please report)");
}

std::unique_ptr<BucketExchange> make_bucket_exchange(std::string_view name) {
  if (name == "dense") return make_dense_exchange();
  if (name == "allgather") return make_allgather_exchange();
  if (name == "own-rounds") return make_own_rounds_exchange();
  if (name == "shared") return make_shared_exchange();
  if (name == "sparse-allreduce") return make_sparse_allreduce_exchange();
  throw Error("no bucket exchange '" + std::string(name) +
              "': dense, allgather, own-rounds, shared or sparse-allreduce");
}

std::string_view bucket_exchange_name(bool uncompressed, ExchangeMode mode, Exchange kind) {
  if (uncompressed) return "dense";
  if (mode == ExchangeMode::shared) return "shared";
  if (mode == ExchangeMode::sparse_allreduce) return "sparse-allreduce";
  switch (kind) {
    case Exchange::allreduce:
      return "dense";
    case Exchange::collective:
      return "own-rounds";
    case Exchange::allgather:
      break;
  }
  return "allgather";
}

}  // namespace gs::compress::detail
