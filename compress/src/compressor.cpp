#include "gs/compress/compressor.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "compressors.hpp"
#include "gs/error.hpp"
#include "gs/kernels/fft.hpp"

namespace gs::compress {

std::string_view to_string(Exchange e) {
  switch (e) {
    case Exchange::allgather: return "allgather";
    case Exchange::allreduce: return "allreduce";
    case Exchange::collective: return "collective";
  }
  return "?";
}

namespace {
void check_ratio(double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0))
    throw Error("compression ratio " + std::to_string(ratio) +
                " is outside (0, 1]: give the fraction of elements to keep, e.g. 0.01");
}
}  // namespace

Compressor::Compressor(double ratio) : ratio_(ratio) { check_ratio(ratio); }

void Compressor::set_ratio(double ratio) {
  check_ratio(ratio);
  ratio_ = ratio;
}

Compressor::Exchanged Compressor::exchange(std::span<const float>, std::string_view, Collectives&,
                                           std::span<float>, std::span<float>) {
  throw Error("compressor '" + std::string(name()) + "' exchanges by " +
              std::string(to_string(exchange())) + ", not by its own collective protocol");
}

void Compressor::add_gradient_variance(std::string_view, std::span<const float>) {
  throw Error("compressor '" + std::string(name()) + "' does not use gradient variances");
}

void Compressor::decompress(const Payload& p, std::span<float> out) const {
  if (out.size() != p.n)
    throw Error("decompress: output has " + std::to_string(out.size()) + " elements, payload n = " +
                std::to_string(p.n));
  if (p.kind == PayloadKind::dense) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = float(p.values[i] * p.scale);
    return;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t j = 0; j < p.indices.size(); ++j) out[std::size_t(p.indices[j])] = p.values[j];
}

void Compressor::aggregate(std::span<const Payload> payloads, std::span<float> out) const {
  if (payloads.empty()) throw Error("aggregate: no payloads");
  std::fill(out.begin(), out.end(), 0.0f);
  std::vector<float> dense;
  for (const Payload& p : payloads) {
    validate(p);
    if (p.n != out.size())
      throw Error("aggregate: a payload has n = " + std::to_string(p.n) + ", the output " +
                  std::to_string(out.size()));
    if (p.kind == PayloadKind::sparse) {
      for (std::size_t j = 0; j < p.indices.size(); ++j)
        out[std::size_t(p.indices[j])] += p.values[j];
    } else {
      dense.resize(p.n);
      decompress(p, dense);
      for (std::size_t i = 0; i < dense.size(); ++i) out[i] += dense[i];
    }
  }
  const float inv = 1.0f / float(payloads.size());
  for (float& v : out) v *= inv;
}

void Compressor::decode_sum(const Payload& summed, int workers, std::span<float> out) const {
  if (workers < 1) throw Error("decode_sum: workers must be >= 1");
  if (summed.kind != PayloadKind::dense)
    throw Error("decode_sum: compressor '" + std::string(name()) +
                "' sends sparse payloads, which travel by all-gather, not all-reduce");
  decompress(summed, out);
  const float inv = 1.0f / float(workers);
  for (float& v : out) v *= inv;
}

std::uint64_t target_count(std::uint64_t n, double ratio) {
  if (n == 0) return 0;
  const auto k = std::uint64_t(std::floor(double(n) * ratio));
  return std::clamp<std::uint64_t>(k, 1, n);
}

namespace {
constexpr std::array<std::string_view, 14> kNames = {
    "sidco-e", "sidco-p", "sidco-gp", "topk", "dgc", "redsync", "gaussianksgd", "randomk", "none",
    "variance", "qsgd-mn", "qsgd-mn-ts", "qsgd-mn-ms", "fft"};
}

std::span<const std::string_view> compressor_names() {
  if (kernels::real_fft_available(kernels::BackendKind::cpu)) return kNames;
  // Without FFTW3, make_compressor refuses "fft" on its default (CPU) backend, saying why, so it
  // is not listed.
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (auto n : kNames)
      if (n != "fft") v.push_back(n);
    return v;
  }();
  return names;
}

bool ratio_is_density(std::string_view name) {
  return name != "none" && name != "variance" && name.rfind("qsgd-mn", 0) != 0;
}

std::unique_ptr<Compressor> make_compressor(std::string_view name, double ratio,
                                            const CompressorOptions& options) {
  check_ratio(ratio);
  if (options.stages < 0) throw Error("compressor: stages must be 0 (adaptive) or >= 1");
  if (name == "none") return detail::make_none();
  if (name == "topk") return detail::make_topk(ratio, options);
  if (name == "randomk") return detail::make_randomk(ratio, options);
  if (name == "qsgd-mn" || name == "qsgd-mn-ts" || name == "qsgd-mn-ms")
    return detail::make_quantizer(name, options);  // ratio checked above, unused (dense codes)
  if (name == "variance") return detail::make_variance(ratio, options);
  if (name == "fft") return detail::make_fft(ratio, options);
  if (std::find(kNames.begin(), kNames.end(), name) != kNames.end())
    return detail::make_threshold_compressor(name, ratio, options);
  std::string known;
  for (auto n : kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw Error("unknown compressor '" + std::string(name) + "': choose one of " + known);
}

}  // namespace gs::compress
