#pragma once
// TrainConfig: everything `gradscope train` takes, shared by the CLI (which fills it), the launcher
// (which turns it back into worker arguments) and the workers (which compare it at start).
#include <cstdint>
#include <string>
#include <vector>

#include "gs/compress/compressor.hpp"

namespace gs::dist {

struct TrainConfig {
  std::string model = "mlp";
  std::string compressor = "sidco-e";
  double ratio = 0.01;
  int workers = 1;
  std::int64_t steps = 0;  // 0: as many as the epochs give
  int epochs = 1;
  std::string granularity = "model";  // layer | model | bucket
  std::uint64_t bucket_size = 1 << 20;
  std::int64_t batch = 64;
  double lr = 0.05;
  double momentum = 0.9;
  // Learning rate over the run: constant; cosine (lr * (1 + cos(pi * step / steps)) / 2, from lr
  // at the first step towards 0 at the last); or step (lr / 10 over the last tenth of the steps,
  // at least the last one; a run of one step keeps lr).
  std::string lr_schedule = "constant";
  // Momentum correction with momentum factor masking (DGC): the momentum moves from the optimizer
  // into each worker's compressor (sparse compressors with error feedback only).
  bool momentum_correction = false;
  // Warm-up over the first warmup_steps steps: dense exchanges the gradient uncompressed;
  // exponential (DGC's) compresses at a ratio falling geometrically from warmup_start_ratio at the
  // first step towards --ratio, which it reaches at step warmup_steps.
  std::int64_t warmup_steps = 0;
  std::string warmup_schedule = "dense";
  double warmup_start_ratio = 0.25;
  std::uint64_t seed = 1;
  int stages = 0;                 // SIDCo: 0 adaptive, else fixed
  // Options of the rival methods, passed to compress::CompressorOptions (same defaults).
  std::vector<int> bits;          // qsgd-mn*: bits per scale (empty: the method's defaults)
  double variance_alpha = compress::CompressorOptions{}.variance_alpha;
  double variance_zeta = compress::CompressorOptions{}.variance_zeta;
  int fft_exponent_bits = compress::CompressorOptions{}.fft_exponent_bits;
  int fft_mantissa_bits = compress::CompressorOptions{}.fft_mantissa_bits;
  std::uint64_t fft_chunk = compress::CompressorOptions{}.fft_chunk;
  std::string backend = "cpu";    // kernels backend for the threshold fits
  std::string record;             // snapshot of rank 0's raw gradients, when set
  bool force = false;             // overwrite --record
  double timeout = 60.0;          // seconds any collective or rendezvous may wait
  bool json = false;
  bool quiet = false;
  // Worker placement: rank < 0 means "launch `workers` processes here".
  int rank = -1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  // gs::Error for values no run could use (ratio, counts, names checked where they are parsed).
  void validate() const;
  // The settings every worker must share, as one canonical line (rank, output flags excluded).
  std::string shared_description() const;
  // Arguments after "gradscope train" that reproduce this config for worker `rank`.
  std::vector<std::string> worker_args(int rank, int port) const;
  // The compressor's options for worker `rank` (its sampling seed differs per worker).
  compress::CompressorOptions compressor_options(int rank) const;
  // bits as "6,10" (empty when unset).
  std::string bits_list() const;
  // The learning rate of step `step` (0-based) of a run of `total` steps.
  double lr_at(std::int64_t step, std::int64_t total) const;
  // Whether step `step` is a warm-up step, and the compression ratio it runs at (1 for a dense
  // warm-up step, `ratio` after the warm-up).
  bool warmup_at(std::int64_t step) const { return step < warmup_steps; }
  // Whether warm-up steps are compressed at a falling ratio (else they go uncompressed).
  bool exponential_warmup() const { return warmup_steps > 0 && warmup_schedule == "exponential"; }
  double ratio_at(std::int64_t step) const;
};

}  // namespace gs::dist
