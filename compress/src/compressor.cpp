// The Compressor base class: the density it aims at, and the decoding and aggregation every
// payload kind shares (compressors override what they do differently).
#include "gs/compress/compressor.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>

#include "gs/base/enum_names.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {

std::string_view to_string(Exchange e) {
  static constexpr EnumName<Exchange> kNames[] = {
      {Exchange::allgather, "allgather"}, {Exchange::allreduce, "allreduce"}, {Exchange::collective, "collective"}};
  return enum_name(kNames, e);
}

Compressor::Compressor(double density) : density_(density) { fitting::check_density(density); }

void Compressor::set_density(double density) {
  fitting::check_density(density);
  density_ = density;
}

void Compressor::save_state(StateWriter& w) const {
  w.put_text(name());
  w.put(density_);
}

void Compressor::load_state(StateReader& r) {
  r.expect(r.get_text(), std::string(name()), "the compressor");
  const double density = r.get<double>();
  if (!(density > 0.0 && density <= 1.0)) r.fail("the compressor's density is out of range");
  set_density(density);
}

Compressor::Exchanged Compressor::exchange(std::span<const float>, std::string_view, Collectives&, std::span<float>,
                                           std::span<float>) {
  throw Error("compressor '" + std::string(name()) + "' exchanges by " + std::string(to_string(exchange())) +
              ", not by its own collective protocol");
}

Compressed Compressor::compress_resident(const float*, std::uint64_t, std::string_view) {
  throw Error("compressor '" + std::string(name()) +
              "' reads host memory only: give it the vector "
              "on the host (compress), or use a selection compressor (topk, the threshold methods, "
              "sidco-topk) on the vector's backend");
}

kernels::Selector::Resident Compressor::resident_selection() const {
  throw Error("compressor '" + std::string(name()) + "' keeps no selection in a backend's memory");
}

kernels::Selector::Resident Compressor::select_resident(const float*, std::uint64_t, std::string_view) {
  throw Error("compressor '" + std::string(name()) +
              "' makes no selection in a backend's memory: give it the "
              "vector on the host (compress)");
}

void count_group(StepStats& s, const CompressInfo& info) {
  s.selected += info.selected;
  s.group_quality.push_back(info.quality());
  s.stages = std::max(s.stages, info.stages);
  s.corrected += info.corrected;
  s.exact += info.exact;
  if (info.estimated) {
    s.estimate_n += info.n;
    s.estimate_selected += info.estimate_selected;
  }
}

CompressInfo info_from(const kernels::SelectionReport& r, std::uint64_t n, double target_density) {
  CompressInfo c;
  c.n = n;
  c.selected = r.count;
  c.target_density = target_density;
  if (r.count > 0 || !std::isnan(r.threshold)) c.threshold = r.threshold;
  c.stages = r.stages;
  c.corrected = r.corrected != 0;
  c.exact = r.exact != 0;
  c.nonfinite = r.nonfinite;
  c.estimated = !std::isnan(r.estimate);
  c.estimate_selected = c.estimated ? r.estimate_count : 0;
  return c;
}

void Compressor::add_gradient_variance(std::string_view, std::span<const float>) {
  throw Error("compressor '" + std::string(name()) + "' does not use gradient variances");
}

void Compressor::decompress(const Payload& p, std::span<float> out) const {
  if (out.size() != p.n)
    throw Error("decompress: output has " + std::to_string(out.size()) +
                " elements, payload n = " + std::to_string(p.n));
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
      throw Error("aggregate: a payload has n = " + std::to_string(p.n) + ", the output " + std::to_string(out.size()));
    if (p.kind == PayloadKind::sparse) {
      for (std::size_t j = 0; j < p.indices.size(); ++j) out[std::size_t(p.indices[j])] += p.values[j];
    } else {
      dense.resize(p.n);
      decompress(p, dense);
      for (std::size_t i = 0; i < dense.size(); ++i) out[i] += dense[i];
    }
  }
  const float inv = 1.0f / float(payloads.size());
  const auto ascending = [](const Payload& p) {
    return std::adjacent_find(p.indices.begin(), p.indices.end(), std::greater_equal<>()) == p.indices.end();
  };
  if (!dense.empty() || !std::all_of(payloads.begin(), payloads.end(), ascending)) {
    for (float& v : out) v *= inv;
    return;
  }
  // Sparse payloads of ascending indices (every selection's): the mean touches only the indices
  // sent (the others stay +0, as 0 * inv), each once however many workers sent it (their lists
  // merged), not a pass over out.
  if (payloads.size() == 1) {
    for (const std::int32_t i : payloads[0].indices) out[std::size_t(i)] *= inv;
    return;
  }
  std::vector<std::int32_t> sent(payloads[0].indices.begin(), payloads[0].indices.end()), merged;
  for (std::size_t r = 1; r < payloads.size(); ++r) {
    merged.clear();
    std::set_union(sent.begin(), sent.end(), payloads[r].indices.begin(), payloads[r].indices.end(),
                   std::back_inserter(merged));
    sent.swap(merged);
  }
  for (const std::int32_t i : sent) out[std::size_t(i)] *= inv;
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

}  // namespace gs::compress
