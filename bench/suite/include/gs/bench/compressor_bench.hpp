#pragma once
// Compressor benchmark (`gradscope bench compressors`): every compressor on the same per-worker
// gradients, W workers as threads exchanging through ThreadCollectives, one training step each.
// Time per step against one plain read pass over the same vector (measured in the same run),
// bytes one worker puts on the wire against dense float32, and the error of the decoded mean.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gs::bench {

struct CompressorBenchConfig {
  std::uint64_t n = 1u << 20;                  // elements per worker's vector
  std::vector<double> densities{0.01, 0.001};  // for the methods that take a density
  std::vector<std::string> names;              // empty: every compressor
  int workers = 2;
  int repeats = 5;
  std::uint64_t seed = 1;
};

struct CompressorBenchRow {
  std::string name;
  double target_density = 0.0;  // 1 for the methods without a density (none, qsgd-mn*)
  std::uint64_t n = 0;
  int workers = 0;
  double median_ms = 0.0;    // one step (error feedback, compression, exchange, decoding)
  double read_ms = 0.0;      // one read pass over n floats, same run
  double density = 0.0;      // elements sent / n (first step)
  double wire_bytes = 0.0;   // one worker, one step
  double dense_bytes = 0.0;  // 4 n
  double rel_error = 0.0;    // ||decoded mean - mean|| / ||mean|| after the first step

  double ratio_to_read() const { return read_ms > 0 ? median_ms / read_ms : 0.0; }
};

// Rows in the order of compressor_names() x densities; on_row is called as each is measured.
std::vector<CompressorBenchRow> run_compressor_bench(const CompressorBenchConfig& config,
                                                     const std::function<void(const CompressorBenchRow&)>& on_row = {});
std::string compressor_bench_table(const std::vector<CompressorBenchRow>& rows);
std::string compressor_bench_json(const std::vector<CompressorBenchRow>& rows);

}  // namespace gs::bench
