// The compressor registry: one row per method, read by make_compressor, the CLI's help and option
// checks, the benchmarks and the Python package.

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "compressors.hpp"
#include "gs/base/error.hpp"
#include "gs/base/join.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/kernels/fft.hpp"

namespace gs::compress {
namespace {

bool fft_available() { return kernels::real_fft_available(kernels::BackendKind::cpu); }

constexpr auto kAllgather = Exchange::allgather;
constexpr auto kCollective = Exchange::collective;

// The options a threshold method's compressor reads: the backend it selects on, SIDCo's stages
// (sidco-topk's for its bound), the seed of a rule that samples (DGC).
std::vector<std::string_view> threshold_options(const fitting::ThresholdMethodInfo& m) {
  std::vector<std::string_view> v{"--backend"};
  if (m.kind == fitting::ThresholdKind::sidco || m.kind == fitting::ThresholdKind::sidco_topk) v.push_back("--stages");
  if (m.kind == fitting::ThresholdKind::sidco) {
    v.push_back("--sidco-as-published");
    v.push_back("--sidco-estimate");
  }
  if (m.seeded) v.push_back("--seed");
  return v;
}

// Built on first use, so other files' static tables may read it: a row per threshold method (each
// sends a sparse selection of its input, sized by the density), then the other compressors.
const std::vector<CompressorInfo>& registry() {
  static const std::vector<CompressorInfo> rows = [] {
    std::vector<CompressorInfo> v;
    for (const fitting::ThresholdMethodInfo& m : fitting::threshold_methods())
      v.push_back({m.name, m.summary, kAllgather, true, true, threshold_options(m),
                   [&m](double d, const CompressorOptions& o) { return detail::make_threshold_compressor(m, d, o); },
                   m.available});
    const std::vector<std::string_view> quantizer_options{"--bits", "--seed"};  // seed: the rounding
    const CompressorInfo others[] = {
        {"randomk",
         "k elements drawn uniformly at random",
         kAllgather,
         true,
         true,
         {"--seed"},
         [](double d, const CompressorOptions& o) { return detail::make_randomk(d, o.seed); }},
        {"none",
         "no compression: the dense gradient, all-reduced",
         Exchange::allreduce,
         false,
         false,
         {},
         [](double, const CompressorOptions&) { return detail::make_none(); }},
        {"variance",
         "variance-based: an element is sent once its sum outweighs its variance",
         kAllgather,
         false,
         false,
         {"--variance-alpha", "--variance-zeta"},
         detail::make_variance},
        {"qsgd-mn", "unbiased stochastic quantizer, one scale (--bits)", kCollective, false, false, quantizer_options,
         [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::one, o); }},
        {"qsgd-mn-ts", "unbiased quantizer with two scales (--bits lo,hi)", kCollective, false, false,
         quantizer_options,
         [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::two, o); }},
        {"qsgd-mn-ms", "unbiased quantizer with several scales (--bits)", kCollective, false, false, quantizer_options,
         [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::several, o); }},
        {"fft",
         "the largest chunked-FFT coefficients as range-based floats",
         kCollective,
         true,
         false,
         {"--backend", "--fft-exponent-bits", "--fft-mantissa-bits", "--fft-chunk"},
         detail::make_fft,
         fft_available},
    };
    v.insert(v.end(), std::begin(others), std::end(others));
    return v;
  }();
  return rows;
}

std::string known_names() {
  return join(registry(), ", ", [](const auto& row) { return row.name; });
}

}  // namespace

std::span<const CompressorInfo> compressor_registry() { return registry(); }

const CompressorInfo& compressor_info(std::string_view name) {
  const auto it =
      std::find_if(registry().begin(), registry().end(), [&](const CompressorInfo& row) { return row.name == name; });
  if (it == registry().end())
    throw Error("unknown compressor '" + std::string(name) + "': choose one of " + known_names());
  return *it;
}

std::span<const std::string_view> compressor_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& row : registry())
      if (!row.available || row.available()) v.push_back(row.name);
    return v;
  }();
  return names;
}

bool density_based(std::string_view name) { return compressor_info(name).density_based; }

double density_for(std::string_view name, std::optional<double> ratio, double fallback, std::string_view what) {
  if (density_based(name)) {
    const double density = ratio.value_or(fallback);
    fitting::check_density(density, what);
    return density;
  }
  if (ratio) {
    fitting::check_density(*ratio, what);
    if (*ratio != 1.0) {
      std::ostringstream os;
      os << what << " " << *ratio << " does nothing for compressor '" << name
         << "': it is not density-based (what it sends does not depend on a density); leave " << what << " out";
      throw Error(os.str());
    }
  }
  return 1.0;
}

bool exchanges_sparse_selection(std::string_view name) {
  const CompressorInfo& info = compressor_info(name);
  return info.sparse_selection && info.exchange == Exchange::allgather;
}

void check_shared_exchange(std::string_view name, std::string_view setting) {
  if (!exchanges_sparse_selection(name))
    throw Error(std::string(setting) + " reduces a sparse selection's values; compressor '" + std::string(name) +
                "' sends no sparse selection: use the all-gather exchange");
}

ExchangeMode exchange_mode(std::string_view name, std::string_view setting) {
  for (ExchangeMode m :
       {ExchangeMode::allgather, ExchangeMode::shared, ExchangeMode::sparse_allreduce, ExchangeMode::automatic})
    if (name == to_string(m)) return m;
  throw Error("unknown " + std::string(setting) + " '" + std::string(name) +
              "': use allgather, shared, sparse-allreduce or auto");
}

ExchangeMode resolve_exchange(ExchangeMode mode, int workers, double density, bool sparse) {
  if (mode != ExchangeMode::automatic) return mode;
  if (!sparse || workers < 2 || !(density > 0.0) || density >= 1.0) return ExchangeMode::allgather;
  const double w = workers, pair = 4.0 + (std::log2(1.0 / density) + 2.0) / 8.0;
  // bytes per selected pair: the all-to-all of the selections, then the kept sums all-gathered
  const double kept = std::min<double>(kSparseAllreduceKeep, w);
  const double gather = (w - 1.0) * pair, reduce = (1.0 + kept) * (w - 1.0) / w * 8.0;
  return reduce < gather ? ExchangeMode::sparse_allreduce : ExchangeMode::allgather;
}

std::string_view to_string(ExchangeMode mode) {
  switch (mode) {
    case ExchangeMode::shared:
      return "shared";
    case ExchangeMode::sparse_allreduce:
      return "sparse-allreduce";
    case ExchangeMode::automatic:
      return "auto";
    case ExchangeMode::allgather:
      break;
  }
  return "allgather";
}

std::unique_ptr<Compressor> make_compressor(std::string_view name, double density, const CompressorOptions& options) {
  fitting::check_density(density);
  if (options.stages < 0) throw Error("compressor: stages must be 0 (adaptive) or >= 1");
  return compressor_info(name).make(density, options);
}

}  // namespace gs::compress
