// The compressor registry: one row per method, read by make_compressor, the CLI's help and option
// checks, the benchmarks and the Python package.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "compressors.hpp"
#include "gs/base/join.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/error.hpp"
#include "gs/kernels/fft.hpp"

namespace gs::compress {
namespace {

using detail::ThresholdMethod;

bool fft_available() { return kernels::real_fft_available(kernels::BackendKind::cpu); }

template <ThresholdMethod M>
std::unique_ptr<Compressor> make_threshold(double density, const CompressorOptions& o) {
  return detail::make_threshold_compressor(M, density, o);
}

constexpr auto kAllgather = Exchange::allgather;
constexpr auto kCollective = Exchange::collective;

const std::array<CompressorInfo, 15> kRegistry = {{
    {"sidco-e", "SIDCo: exponential fits at every stage (multi-stage, adaptive stage count)",
     kAllgather, true, true, make_threshold<ThresholdMethod::sidco_e>},
    {"sidco-p", "SIDCo: generalized-Pareto fits at every stage", kAllgather, true, true,
     make_threshold<ThresholdMethod::sidco_p>},
    {"sidco-gp", "SIDCo: a gamma first stage, generalized-Pareto tail stages", kAllgather, true, true,
     make_threshold<ThresholdMethod::sidco_gp>},
    {"sidco-topk", "exact top-k at SIDCo's cost: the k largest above a bound fitted to a sample",
     kAllgather, true, true, make_threshold<ThresholdMethod::sidco_topk>},
    {"topk", "exact top-k by magnitude (ties to the lower index)", kAllgather, true, true,
     [](double d, const CompressorOptions& o) { return detail::make_topk(d, o); }},
    {"dgc", "DGC: the threshold of a 1% random sample, exact top-k when it overshoots", kAllgather,
     true, true, make_threshold<ThresholdMethod::dgc>},
    {"redsync", "RedSync: bisection between the mean and the maximum of |g|", kAllgather, true, true,
     make_threshold<ThresholdMethod::redsync>},
    {"gaussianksgd", "GaussianKSGD: a normal quantile of g, corrected up to 3 times", kAllgather,
     true, true, make_threshold<ThresholdMethod::gaussianksgd>},
    {"randomk", "k elements drawn uniformly at random", kAllgather, true, true,
     [](double d, const CompressorOptions& o) { return detail::make_randomk(d, o.seed); }},
    {"none", "no compression: the dense gradient, all-reduced", Exchange::allreduce, false, false,
     [](double, const CompressorOptions&) { return detail::make_none(); }},
    {"variance", "variance-based: an element is sent once its sum outweighs its variance",
     kAllgather, false, false, detail::make_variance},
    {"qsgd-mn", "unbiased stochastic quantizer, one scale (--bits)", kCollective, false, false,
     [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::one, o); }},
    {"qsgd-mn-ts", "unbiased quantizer with two scales (--bits lo,hi)", kCollective, false, false,
     [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::two, o); }},
    {"qsgd-mn-ms", "unbiased quantizer with several scales (--bits)", kCollective, false, false,
     [](double, const CompressorOptions& o) { return detail::make_quantizer(detail::Scales::several, o); }},
    {"fft", "the largest chunked-FFT coefficients as range-based floats", kCollective, true, false,
     detail::make_fft, fft_available},
}};

std::string known_names() {
  return join(kRegistry, ", ", [](const auto& row) { return row.name; });
}

}  // namespace

std::span<const CompressorInfo> compressor_registry() { return kRegistry; }

const CompressorInfo& compressor_info(std::string_view name) {
  const auto it = std::find_if(kRegistry.begin(), kRegistry.end(),
                               [&](const CompressorInfo& row) { return row.name == name; });
  if (it == kRegistry.end())
    throw Error("unknown compressor '" + std::string(name) + "': choose one of " + known_names());
  return *it;
}

std::span<const std::string_view> compressor_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& row : kRegistry)
      if (!row.available || row.available()) v.push_back(row.name);
    return v;
  }();
  return names;
}

bool density_based(std::string_view name) { return compressor_info(name).density_based; }

std::unique_ptr<Compressor> make_compressor(std::string_view name, double density,
                                            const CompressorOptions& options) {
  check_density(density);
  if (options.stages < 0) throw Error("compressor: stages must be 0 (adaptive) or >= 1");
  return compressor_info(name).make(density, options);
}

}  // namespace gs::compress
