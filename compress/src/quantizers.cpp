// Unbiased stochastic quantizers whose codes add up by all-reduce (algorithms.md section 8):
// qsgd-mn (one scale), qsgd-mn-ts (two scales) and qsgd-mn-ms (L scales). Each exchange of a vector
// runs up to three rounds over Collectives:
//   1. all-reduce MAX of max|g| (one float): every worker quantizes against the same M;
//   2. multi-scale only: each worker picks, per element, the finest level whose codes still fit in
//      the coarsest level's range (a deterministic rule, so the estimate stays unbiased), then all
//      workers agree on the MIN (LevelFormat): an all-reduce MIN of int8 indices, or, where it
//      takes fewer bytes, an all-reduce SUM of packed thermometer bits [level >= j] (the MIN is the
//      count of j whose sum is the worker count);
//   3. all-reduce SUM of the integer codes in the smallest format that cannot overflow (SumFormat):
//      int8 when workers * s_1 <= 127, int32, or bit-packed (Lanes): each code offset by s_1 into
//      [0, 2 s_1], in lanes of L = bit_width(2 W s_1) bits, floor(63 / L) lanes to an int64 word.
// Every code is bounded by s_1 = 2^b_1 - 1 (the coarsest level): at level k a worker's code is at
// most ceil(|g|/M * s_k), which the level rule keeps <= s_1, and the MIN only moves to coarser
// levels. So the sum format depends on the smallest bit width only. No error feedback:
// E[decoded] = g, the residual stays empty (error_feedback() is false).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "compressors.hpp"
#include "gs/base/error.hpp"
#include "gs/base/mix64.hpp"

namespace gs::compress {

std::string bits_text(std::span<const int> bits) {
  std::string s;
  for (int b : bits) {
    if (!s.empty()) s += ',';
    s += std::to_string(b);
  }
  return s;
}

}  // namespace gs::compress

namespace gs::compress::detail {
namespace {

// SplitMix64 (gs::mix64 over a Weyl sequence): small, fast and well mixed; one stream
// per compressor, seeded per worker.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const std::uint64_t z = mix64(state_);
    state_ += 0x9E3779B97F4A7C15ull;
    return double(z >> 11) * 0x1.0p-53;
  }
  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t s) { state_ = s; }

 private:
  std::uint64_t state_;
};

}  // namespace

SumFormat SumFormat::choose(int workers, std::int64_t max_code, std::size_t n) {
  SumFormat f;
  f.lanes = Lanes::of(std::bit_width(std::uint64_t(2 * std::int64_t(workers) * max_code)));
  const std::uint64_t packed = 8 * std::uint64_t(f.lanes.words(n));
  if (std::int64_t(workers) * max_code <= 127 && n <= packed)
    f.kind = Kind::int8;
  else if (packed < 4 * std::uint64_t(n))
    f.kind = Kind::packed;
  else
    f.kind = Kind::int32;
  return f;
}

std::uint64_t SumFormat::bytes(std::size_t n) const {
  switch (kind) {
    case Kind::int8:
      return n;
    case Kind::int32:
      return 4 * std::uint64_t(n);
    case Kind::packed:
      return 8 * std::uint64_t(lanes.words(n));
  }
  return 0;
}

LevelFormat LevelFormat::choose(int workers, std::size_t levels, std::size_t n) {
  LevelFormat f;
  f.lanes = Lanes::of(std::bit_width(unsigned(workers)));
  f.thermometer = 8 * std::uint64_t(f.lanes.words(n * (levels - 1))) < n;
  return f;
}

std::uint64_t LevelFormat::bytes(std::size_t n, std::size_t levels) const {
  return thermometer ? 8 * std::uint64_t(lanes.words(n * (levels - 1))) : n;
}

namespace {

class QsgdMnCompressor final : public Compressor {
 public:
  QsgdMnCompressor(std::string_view name, std::vector<int> bits, std::uint64_t seed)
      : Compressor(1.0), name_(name), bits_(std::move(bits)), rng_(seed) {
    for (int b : bits_) scales_.push_back(double((std::int64_t(1) << b) - 1));
  }

  std::string_view name() const override { return name_; }
  Exchange exchange() const override { return Exchange::collective; }
  // Unbiased: what is not sent is noise with mean zero, not a residual to carry forward.
  bool error_feedback() const override { return false; }

  Compressed compress(std::span<const float>, std::string_view tensor) override {
    throw Error("compressor '" + name_ + "' (tensor '" + std::string(tensor) +
                "') quantizes against a scale all workers agree on: exchange it with exchange() "
                "or ModelCompressor::step(), not compress()");
  }

  Exchanged exchange(std::span<const float> acc, std::string_view tensor, Collectives& comm, std::span<float> sent,
                     std::span<float> mean) override;

  void save_state(StateWriter& w) const override {
    Compressor::save_state(w);
    w.put(rng_.state());
  }
  void load_state(StateReader& r) override {
    Compressor::load_state(r);
    rng_.set_state(r.get<std::uint64_t>());
  }

 private:
  double scale_of(std::size_t i) const { return scales_[scales_.size() > 1 ? std::size_t(level_[i]) : 0]; }
  std::int32_t code(std::span<const float> acc, std::size_t i, double m, std::span<float> sent);
  template <class Code>
  void quantize_and_sum(std::span<const float> acc, double m, Collectives& comm, std::span<float> sent,
                        std::span<float> mean);
  void quantize_and_sum_packed(std::span<const float> acc, double m, const SumFormat& format, Collectives& comm,
                               std::span<float> sent, std::span<float> mean);
  void agree_on_levels(Collectives& comm);

  std::string name_;
  std::vector<int> bits_;       // ascending, in [1, 16]
  std::vector<double> scales_;  // s_k = 2^b_k - 1
  SplitMix64 rng_;
  std::vector<std::int8_t> level_;  // per element: index into scales_ (multi-scale)
};

Compressor::Exchanged QsgdMnCompressor::exchange(std::span<const float> acc, std::string_view tensor, Collectives& comm,
                                                 std::span<float> sent, std::span<float> mean) {
  const std::size_t n = acc.size();
  if (sent.size() != n || mean.size() != n)
    throw Error("compressor '" + name_ + "': tensor '" + std::string(tensor) + "' has " + std::to_string(n) +
                " elements but the output spans have " + std::to_string(sent.size()) + " and " +
                std::to_string(mean.size()));
  Exchanged r;
  r.info.n = n;
  r.info.selected = n;  // every element is sent (as a code); density 1 by construction
  r.info.target_density = 1.0;
  if (n == 0) return r;  // every worker has the same size, so all skip the rounds together

  const int workers = comm.world_size();
  const auto max_code = std::int64_t(scales_.front());
  if (std::int64_t(workers) * max_code > std::numeric_limits<std::int32_t>::max())
    throw Error("compressor '" + name_ + "': " + std::to_string(workers) + " workers times codes up to " +
                std::to_string(max_code) + " overflow an int32 sum; use fewer --bits");

  // Round 1: the common scale. A non-finite element makes this worker's max +Inf, so every
  // worker sees it and fails together instead of leaving the others waiting in a later round.
  float local[1] = {0.0f};
  bool finite = true;
  for (float v : acc) {
    if (!std::isfinite(v)) {
      finite = false;
      break;
    }
    local[0] = std::max(local[0], std::fabs(v));
  }
  if (!finite) local[0] = std::numeric_limits<float>::infinity();
  comm.allreduce_max(local);
  r.wire_bytes += sizeof(float);
  if (!std::isfinite(local[0]))
    throw Error("compressor '" + name_ + "': tensor '" + std::string(tensor) + "' holds NaN or Inf " +
                (finite ? "on another worker" : "on worker " + std::to_string(comm.rank())) +
                "; quantizers need finite gradients (lower the learning rate or check the data)");
  const double m = local[0];
  if (m == 0.0) {  // every worker's vector is zero: nothing to quantize, no division by zero
    std::fill(sent.begin(), sent.end(), 0.0f);
    std::fill(mean.begin(), mean.end(), 0.0f);
    return r;
  }

  // Round 2 (two or more scales): the finest level whose code still fits in [0, s_1], agreed by MIN.
  if (scales_.size() > 1) {
    level_.assign(n, 0);
    const double s1 = scales_.front();
    for (std::size_t i = 0; i < n; ++i) {
      const double a = double(std::fabs(acc[i])) / m;
      std::size_t k = 0;
      while (k + 1 < scales_.size() && std::ceil(a * scales_[k + 1]) <= s1) ++k;
      level_[i] = std::int8_t(k);
    }
    agree_on_levels(comm);
    r.wire_bytes += LevelFormat::choose(workers, scales_.size(), n).bytes(n, scales_.size());
  }

  // Round 3: codes summed in a format that cannot overflow.
  const SumFormat format = SumFormat::choose(workers, max_code, n);
  switch (format.kind) {
    case SumFormat::Kind::int8:
      quantize_and_sum<std::int8_t>(acc, m, comm, sent, mean);
      break;
    case SumFormat::Kind::int32:
      quantize_and_sum<std::int32_t>(acc, m, comm, sent, mean);
      break;
    case SumFormat::Kind::packed:
      quantize_and_sum_packed(acc, m, format, comm, sent, mean);
      break;
  }
  r.wire_bytes += format.bytes(n);
  return r;
}

// The signed code of element i (E[code] = |g_i| / M * s at its level, with g_i's sign); writes
// what this worker contributes to sent[i].
std::int32_t QsgdMnCompressor::code(std::span<const float> acc, std::size_t i, double m, std::span<float> sent) {
  const double s = scale_of(i);
  // Same a as the level rule used, so the code stays within ceil(a * s) <= s_1.
  const double l = double(std::fabs(acc[i])) / m * s;
  const double fl = std::floor(l);
  const double xi = fl + (rng_.uniform() < l - fl ? 1.0 : 0.0);  // E[xi] = l
  const double q = std::signbit(acc[i]) ? -xi : xi;
  sent[i] = float(q * (m / s));
  return std::int32_t(q);
}

template <class Code>
void QsgdMnCompressor::quantize_and_sum(std::span<const float> acc, double m, Collectives& comm, std::span<float> sent,
                                        std::span<float> mean) {
  const std::size_t n = acc.size();
  std::vector<Code> codes(n);
  for (std::size_t i = 0; i < n; ++i) codes[i] = Code(code(acc, i, m, sent));
  comm.allreduce_sum(std::span<Code>(codes));
  const double w = comm.world_size();
  for (std::size_t i = 0; i < n; ++i) mean[i] = float(double(codes[i]) * (m / scale_of(i)) / w);
}

void QsgdMnCompressor::quantize_and_sum_packed(std::span<const float> acc, double m, const SumFormat& f,
                                               Collectives& comm, std::span<float> sent, std::span<float> mean) {
  const std::size_t n = acc.size();
  const auto offset = std::int64_t(scales_.front());  // codes in [-s_1, s_1] become [0, 2 s_1]
  std::vector<std::int64_t> words;
  words.reserve(f.lanes.words(n));
  Lanes::Writer out(f.lanes, words);
  for (std::size_t i = 0; i < n; ++i) out.push(std::uint64_t(code(acc, i, m, sent) + offset));
  out.finish();
  comm.allreduce_sum(std::span<std::int64_t>(words));
  const int workers = comm.world_size();
  Lanes::Reader in(f.lanes, words);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t sum = std::int64_t(in.next()) - offset * workers;
    mean[i] = float(double(sum) * (m / scale_of(i)) / workers);
  }
}

// level_[i] becomes the MIN over the workers, by whichever LevelFormat is narrower.
void QsgdMnCompressor::agree_on_levels(Collectives& comm) {
  const std::size_t n = level_.size(), steps = scales_.size() - 1;
  const LevelFormat f = LevelFormat::choose(comm.world_size(), scales_.size(), n);
  if (!f.thermometer) {
    comm.allreduce_min(level_);
    return;
  }
  // Lanes [level_i >= j] for j = 1..steps, element after element.
  std::vector<std::int64_t> words;
  words.reserve(f.lanes.words(n * steps));
  Lanes::Writer out(f.lanes, words);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 1; j <= steps; ++j) out.push(std::size_t(level_[i]) >= j ? 1 : 0);
  out.finish();
  comm.allreduce_sum(std::span<std::int64_t>(words));
  const auto workers = std::uint64_t(comm.world_size());
  Lanes::Reader in(f.lanes, words);
  for (std::size_t i = 0; i < n; ++i) {
    std::int8_t agreed = 0;
    for (std::size_t j = 1; j <= steps; ++j) agreed += in.next() == workers ? 1 : 0;
    level_[i] = agreed;
  }
}

// Bits per scale: the defaults when empty, else exactly `count` values (or at least `count` when
// `at_least`), each in [1, 16], strictly ascending.
std::vector<int> checked_bits(std::string_view name, const std::vector<int>& given, std::vector<int> defaults,
                              std::size_t count, bool at_least) {
  if (given.empty()) return defaults;
  const std::string who = "compressor '" + std::string(name) + "': --bits " + bits_text(given);
  if (at_least ? given.size() < count : given.size() != count)
    throw Error(who + " gives " + std::to_string(given.size()) + " value(s); it takes " +
                (at_least ? "at least " : "") + std::to_string(count) + " (e.g. " + bits_text(defaults) + ")");
  for (std::size_t k = 0; k < given.size(); ++k) {
    if (given[k] < 1 || given[k] > 16) throw Error(who + ": " + std::to_string(given[k]) + " bits is outside [1, 16]");
    if (k > 0 && given[k] <= given[k - 1])
      throw Error(who + ": the bit widths must be strictly ascending (e.g. " + bits_text(defaults) + ")");
  }
  return given;
}

}  // namespace

std::unique_ptr<Compressor> make_quantizer(Scales scales, const CompressorOptions& o) {
  switch (scales) {
    case Scales::one:
      return std::make_unique<QsgdMnCompressor>("qsgd-mn", checked_bits("qsgd-mn", o.quant_bits, {4}, 1, false),
                                                o.seed);
    case Scales::two:
      return std::make_unique<QsgdMnCompressor>("qsgd-mn-ts",
                                                checked_bits("qsgd-mn-ts", o.quant_bits, {6, 10}, 2, false), o.seed);
    case Scales::several:
      return std::make_unique<QsgdMnCompressor>(
          "qsgd-mn-ms", checked_bits("qsgd-mn-ms", o.quant_bits, {4, 6, 8, 10}, 2, true), o.seed);
  }
  throw Error("make_quantizer: unknown number of scales");
}

}  // namespace gs::compress::detail
