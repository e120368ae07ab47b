// none, topk, randomk, and count_nonfinite, which the dense compressors share.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "compressors.hpp"
#include "gs/base/error.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/select.hpp"

namespace gs::compress::detail {

std::uint64_t count_nonfinite(std::span<const float> acc) {
  std::uint64_t c = 0;
  for (float v : acc) c += !std::isfinite(v);
  return c;
}

namespace {

class NoneCompressor final : public Compressor {
 public:
  NoneCompressor() : Compressor(1.0) {}
  std::string_view name() const override { return "none"; }
  Exchange exchange() const override { return Exchange::allreduce; }
  Compressed compress(std::span<const float> acc, std::string_view) override {
    Compressed c;
    c.payload.kind = PayloadKind::dense;
    c.payload.n = acc.size();
    c.payload.values.assign(acc.begin(), acc.end());
    c.info.n = acc.size();
    c.info.selected = acc.size();
    c.info.target_density = 1.0;
    c.info.nonfinite = count_nonfinite(acc);
    return c;
  }
};

// Exact top-k (radix select) on the backend's Selector: the min(k, finite) largest |acc|, ties
// broken towards lower indices.
class TopkCompressor final : public Compressor {
 public:
  TopkCompressor(double density, const CompressorOptions& o) : Compressor(density), selector_(o.backend) {}
  std::string_view name() const override { return "topk"; }
  Compressed compress(std::span<const float> acc, std::string_view tensor) override {
    return compress_resident(selector_->place(acc), acc.size(), tensor);
  }
  std::optional<kernels::BackendKind> resident_backend() const override { return selector_.get().kind(); }
  kernels::Selector::Resident resident_selection() const override { return resident_; }
  Compressed compress_resident(const float* g, std::uint64_t n, std::string_view) override {
    Compressed c;
    kernels::Selection<std::int32_t> sel;
    selector_->select(g, n, request(n));
    const kernels::SelectionReport r = selector_->fetch(sel);
    resident_ = selector_->kind() == kernels::BackendKind::cpu ? kernels::Selector::Resident{}
                                                               : selector_->resident_selection();
    c.info = info_from(r, n, density());  // threshold: the k-th largest |acc|, the least sent
    if (r.count == 0) c.info.threshold = std::numeric_limits<double>::quiet_NaN();
    c.payload.n = n;
    c.payload.indices = std::move(sel.indices);
    c.payload.values = std::move(sel.values);
    return c;
  }
  kernels::Selector::Resident select_resident(const float* g, std::uint64_t n, std::string_view) override {
    resident_ = selector_->select(g, n, request(n));
    return resident_;
  }

 private:
  mutable SelectorOnUse selector_;  // made at the first selection, on the device it runs on
  kernels::SelectRequest request(std::uint64_t n) const {
    kernels::SelectRequest r;
    r.rule = kernels::SelectRequest::Rule::topk;
    r.k = fitting::target_count(n, density());
    return r;
  }
  kernels::Selector::Resident resident_;
};

class RandomkCompressor final : public Compressor {
 public:
  RandomkCompressor(double density, std::uint64_t seed) : Compressor(density), rng_(seed) {}
  std::string_view name() const override { return "randomk"; }
  Compressed compress(std::span<const float> acc, std::string_view) override {
    Compressed c;
    const std::uint64_t k = fitting::target_count(acc.size(), density());
    c.payload.n = acc.size();
    // Selection sampling: k distinct indices, uniformly, already in ascending order. Values are
    // sent unscaled: error feedback keeps what is not sent, so no n/k rescaling is wanted.
    std::vector<std::int32_t> all(acc.size());
    std::iota(all.begin(), all.end(), 0);
    c.payload.indices.reserve(k);
    std::sample(all.begin(), all.end(), std::back_inserter(c.payload.indices), k, rng_);
    // Non-finite entries are never sent (they stay in the residual).
    std::erase_if(c.payload.indices, [&](std::int32_t i) { return !std::isfinite(acc[std::size_t(i)]); });
    for (std::int32_t i : c.payload.indices) c.payload.values.push_back(acc[std::size_t(i)]);
    c.info.n = acc.size();
    c.info.selected = c.payload.count();
    c.info.target_density = density();
    c.info.nonfinite = count_nonfinite(acc);
    return c;
  }

  // The random stream as the standard library writes it (its full engine state, as text).
  void save_state(StateWriter& w) const override {
    Compressor::save_state(w);
    std::ostringstream s;
    s << rng_;
    w.put_text(s.str());
  }
  void load_state(StateReader& r) override {
    Compressor::load_state(r);
    std::istringstream s(r.get_text());
    s >> rng_;
    if (!s) r.fail("randomk's random stream does not read back");
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Compressor> make_none() { return std::make_unique<NoneCompressor>(); }
std::unique_ptr<Compressor> make_topk(double density, const CompressorOptions& o) {
  return std::make_unique<TopkCompressor>(density, o);
}
std::unique_ptr<Compressor> make_randomk(double density, std::uint64_t seed) {
  return std::make_unique<RandomkCompressor>(density, seed);
}

}  // namespace gs::compress::detail
