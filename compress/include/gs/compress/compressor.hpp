#pragma once
// Compressor: turns one vector (the error-fed accumulator of a tensor, bucket or model) into a
// payload, and several workers' payloads back into their mean. Compressors are made by name; one
// instance serves every tensor of a model, so model-wide state (SIDCo's adaptive number of stages)
// lives in it and advances once per step through end_step().
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/option_table.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/collectives.hpp"
#include "gs/compress/payload.hpp"
#include "gs/compress/step_stats.hpp"
#include "gs/fitting/thresholds.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/select.hpp"

namespace gs::compress {

// How payloads of several workers are combined: all-gather of variable-size sparse payloads, an
// element-wise sum of equal-size dense codes by all-reduce, or the compressor's own protocol over
// Collectives (several rounds: e.g. all-reduce MAX of a scale, then SUM of codes).
enum class Exchange { allgather, allreduce, collective };
std::string_view to_string(Exchange e);

// What one compress() call did (the "context" of the payload).
struct CompressInfo {
  std::uint64_t n = 0;         // elements of the input
  std::uint64_t selected = 0;  // elements sent (n for dense payloads)
  double target_density = 1.0;
  double threshold = std::numeric_limits<double>::quiet_NaN();  // |x| cut, when the method has one
  int stages = 0;                                               // SIDCo stages used (0 when not SIDCo)
  bool corrected = false;       // SIDCo's count correction changed the selection (fitting::SidcoRule)
  bool exact = false;           // the selection ended on exact top-k (SIDCo: the correction's guard)
  std::uint64_t nonfinite = 0;  // NaN/Inf seen in the input
  // SIDCo's own estimate: whether there was one (the stages placed a threshold) and what it
  // selected before any correction.
  bool estimated = false;
  std::uint64_t estimate_selected = 0;

  double density() const { return n ? double(selected) / double(n) : 0.0; }
  // Estimation quality: achieved density / target density; 1 is ideal.
  double quality() const { return target_density > 0 ? density() / target_density : 0.0; }
  // The same of SIDCo's own estimate, before any correction (0 without one).
  double estimate_quality() const {
    return estimated && n && target_density > 0 ? double(estimate_selected) / double(n) / target_density : 0.0;
  }
};

struct Compressed {
  Payload payload;
  CompressInfo info;
};

// One group's (bucket's) compression counted into its step: its selection, quality, stages, and
// SIDCo's estimate, correction and exact top-k.
void count_group(StepStats& s, const CompressInfo& info);

// A selection's report (kernels' resident selections) as what a compressor's info says of it.
CompressInfo info_from(const kernels::SelectionReport& r, std::uint64_t n, double target_density);

struct CompressorOptions {
  std::uint64_t seed = 1;           // random-k and DGC sampling
  std::string backend = "cpu";      // kernels backend: cpu, cuda, auto (or cuda-host, for checking)
  int stages = 0;                   // SIDCo: 0 = by density (default_sidco_stages; the adaptive stage
                                    // controller's start as published), else a fixed number >= 1
  bool sidco_as_published = false;  // SIDCo as published: the stage controller, no count correction
  // SIDCo's threshold in training: "carried" (each step's fit times the calibration the last count
  // of the same tensor gave: docs/algorithms.md) or "fit" (the fit alone). As published: the fit.
  std::string sidco_estimate = "carried";

  // Rival methods (algorithms.md sections 6 to 8).
  double variance_alpha = 1.0;   // variance: send r_i when r_i^2 > alpha * v_i
  double variance_zeta = 0.999;  // variance: v_i decay for elements not sent
  int fft_exponent_bits = 4;     // fft: range-based float layout of kept coefficients
  int fft_mantissa_bits = 10;
  std::uint64_t fft_chunk = 0;    // fft: real FFT length (0 = the method's default)
  std::vector<int> quant_bits{};  // qsgd-mn*: bits per scale, ascending (empty = the defaults)
};

// The seed of worker `rank`'s sampling streams (random-k, DGC) in a run seeded with `seed`: one
// stream per worker, the same on every resume. gradscope train, the DDP hook and the benches use it.
constexpr std::uint64_t worker_seed(std::uint64_t seed, std::uint64_t rank) { return seed * 1000003ull + rank; }

// quant_bits as the --bits flag writes them: "6,10".
std::string bits_text(std::span<const int> bits);

// CompressorOptions as an option table (gs/base/option_table.hpp): --seed, --backend, --stages,
// --sidco-as-published, --bits, --variance-alpha, --variance-zeta, --fft-exponent-bits, --fft-mantissa-bits,
// --fft-chunk. `gradscope train` takes its flags from it and Python's gradscope.ddp.State its keywords.
const std::vector<OptionRow<CompressorOptions>>& compressor_option_rows();

// Statistics of the vector a compressor is about to be given, taken by the pass that writes it
// (error feedback's accumulate, momentum correction's): `fields` as Compressor::stats_on_write()
// asks; `taken` holds kernels::cpu::stats(acc, fields) to the bit once a pass wrote all of acc,
// and stays empty where no pass wrote it (acc is g itself).
struct StatsOnWrite {
  fitting::StatsFields fields;
  std::optional<fitting::MagnitudeStats> taken;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  virtual std::string_view name() const = 0;
  // The target density: the fraction of elements to send (the CLI's --ratio).
  double density() const { return density_; }
  // Changes the target density from the next compress() on (a density warm-up walks it down to the
  // run's density); gs::Error outside (0, 1]. Methods with model-wide state tied to the density
  // (SIDCo's stage controller) re-aim it.
  virtual void set_density(double density);
  virtual Exchange exchange() const { return Exchange::allgather; }
  // Whether the residual memory feeds what was not sent back into the next step (error feedback).
  // Unbiased quantizers send an unbiased estimate of acc instead and keep no residual.
  virtual bool error_feedback() const { return true; }

  // Selects what to send from acc. tensor names the vector (per-tensor state, messages). Sparse
  // payloads hold acc's values exactly, at distinct indices; that is what keeps the residual
  // invariant exact.
  virtual Compressed compress(std::span<const float> acc, std::string_view tensor) = 0;
  // The statistics of all of acc that compress() reads first, for a caller whose pass writes acc
  // to take on the way (StatsOnWrite): SIDCo's stage 1 on the CPU backend; nullopt for the others.
  virtual std::optional<fitting::StatsFields> stats_on_write() const { return std::nullopt; }
  // compress() given those statistics of acc: the same payload, without the read that takes them.
  virtual Compressed compress_given(std::span<const float> acc, std::string_view tensor,
                                    const fitting::MagnitudeStats& /*first*/) {
    return compress(acc, tensor);
  }

  // The kernels backend whose memory compress_resident() reads: the selection compressors (topk,
  // the threshold methods, sidco-topk) select through a kernels::Selector on their --backend;
  // nullopt for the others, which read host memory only.
  virtual std::optional<kernels::BackendKind> resident_backend() const { return std::nullopt; }
  // compress() of n floats at g, a vector already in resident_backend()'s memory (device memory
  // for cuda, e.g. a CUDA tensor): nothing is copied in, only the selection comes back to the host.
  // gs::Error for a compressor without a resident backend.
  virtual Compressed compress_resident(const float* g, std::uint64_t n, std::string_view tensor);
  // After compress_resident(): the selection it sent (its payload's indices and values) where it
  // was made, in resident_backend()'s memory, valid until the compressor's next call. gs::Error for
  // a compressor without a resident backend.
  virtual kernels::Selector::Resident resident_selection() const;
  // The selection compress_resident() would send, made and left in resident_backend()'s memory
  // with its report (kernels::Selector::select): with the CUDA backend nothing comes back and
  // nothing waits, what the DDP hook gathers with device collectives. A compressor whose next
  // selection depends on this one's count (SIDCo's adaptive stage controller, as published) reads
  // that count back: one synchronization. gs::Error for a compressor without a resident backend.
  virtual kernels::Selector::Resident select_resident(const float* g, std::uint64_t n, std::string_view tensor);

  // Exchange::collective only: the whole exchange of one vector. Every worker calls it with its own
  // acc (same size everywhere). sent (acc.size()) receives what this worker's contribution decodes
  // to (the residual keeps acc - sent); mean receives the decoded mean over workers. info.selected
  // counts the elements sent; the returned bytes are what this worker put on the wire in all rounds.
  struct Exchanged {
    CompressInfo info;
    std::uint64_t wire_bytes = 0;
  };
  virtual Exchanged exchange(std::span<const float> acc, std::string_view tensor, Collectives& comm,
                             std::span<float> sent, std::span<float> mean);

  // Compressors that weigh each element by the variance of its mini-batch gradient (variance-based
  // sparsification) need, before each compress() of a vector, the per-element sum over the batch of
  // squared per-sample gradients divided by B^2.
  virtual bool needs_gradient_variance() const { return false; }
  virtual void add_gradient_variance(std::string_view tensor, std::span<const float> v);

  // Once per training step, after every vector of the model went through compress().
  virtual void end_step() {}

  // Checkpoints: what the compressor carries from one step to the next (its density, adaptive
  // controllers, random streams, per-tensor accumulators), saved between steps. load_state() on a
  // compressor made with the same name and options continues exactly where the saved one stood;
  // gs::Error (through r) for a state that does not fit. Overrides call the base first.
  virtual void save_state(StateWriter& w) const;
  virtual void load_state(StateReader& r);

  // out (size p.n) = the vector the payload stands for (zeros where nothing was sent).
  virtual void decompress(const Payload& p, std::span<float> out) const;
  // out = mean over workers of decompress(payloads[w]); sparse payloads are scatter-added.
  virtual void aggregate(std::span<const Payload> payloads, std::span<float> out) const;
  // All-reduce path: summed holds the element-wise sum of `workers` dense payloads; out = mean.
  virtual void decode_sum(const Payload& summed, int workers, std::span<float> out) const;

 protected:
  explicit Compressor(double density);

 private:
  double density_;
};

// One row of the compressor registry: what a compressor is, and how to make it. The CLI, the
// option checks, the benchmarks and the Python package all read this one table.
struct CompressorInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help and the docs
  Exchange exchange;
  // The density sets what the compressor sends (the sparsifiers and fft); otherwise it is unused
  // (none, the quantizers) or only a nominal reference for quality (variance).
  bool density_based;
  // It sends a selection of the input's own elements as sparse (index, value) pairs.
  bool sparse_selection;
  // The options of compressor_option_rows() it reads, by flag ("--stages"): any other option set
  // away from its default would do nothing, and is refused (check_options_read).
  std::vector<std::string_view> options;
  // Makes one; density already checked to lie in (0, 1].
  std::function<std::unique_ptr<Compressor>(double density, const CompressorOptions& options)> make;
  // Whether this build can make it (null: always); when not, make_compressor says why.
  bool (*available)() = nullptr;
};

// Every row, in a stable order (including those this build cannot make): a row per threshold
// method (gs/fitting/threshold_methods.hpp, in its order), then the others.
std::span<const CompressorInfo> compressor_registry();
// The row of `name`; gs::Error for an unknown name, listing the known ones.
const CompressorInfo& compressor_info(std::string_view name);
// Every name make_compressor accepts in this build, in the registry's order.
std::span<const std::string_view> compressor_names();
// gs::Error for an unknown name (listing the known ones) or a density outside (0, 1].
std::unique_ptr<Compressor> make_compressor(std::string_view name, double density,
                                            const CompressorOptions& options = {});

// Whether the named compressor's density sets what it sends (CompressorInfo::density_based).
bool density_based(std::string_view name);
// The density the named compressor runs at, from the ratio asked for (nullopt: none given). A
// density-based compressor runs at the ratio, checked to lie in (0, 1], or at `fallback`; any other
// (none, the quantizers, variance) sends what it sends whatever the ratio, so it runs at 1 and
// refuses a ratio other than 1, which would do nothing. `what` names the ratio in the caller's
// words ("--ratio", "ratio"). gradscope train and the DDP hook both take their density from it.
double density_for(std::string_view name, std::optional<double> ratio, double fallback, std::string_view what);
// Whether the named compressor all-gathers a sparse selection (which the shared exchange and the
// sparse all-reduce can exchange instead); gs::Error, from check_shared_exchange, unless it does:
// `setting` names the exchange in the caller's words ("--exchange shared").
bool exchanges_sparse_selection(std::string_view name);
void check_shared_exchange(std::string_view name, std::string_view setting);

// How the workers exchange a sparse, error-fed compressor's selections (gradscope train
// --exchange, the DDP hook's exchange=): allgather, every worker's pairs to every worker;
// shared, the values at a rotating leader's indices all-reduced; sparse-allreduce, each region of
// the indices summed by one worker and the largest sums (up to kSparseAllreduceKeep k in all)
// all-gathered (sparse_allreduce.hpp).
// auto: whichever of allgather and sparse-allreduce the exchange model (scripts/exchange_model.py)
// says puts fewer bytes on a worker's link at this number of workers and density.
enum class ExchangeMode : std::uint8_t { allgather = 0, shared = 1, sparse_allreduce = 2, automatic = 3 };
// The sparse all-reduce's update holds the largest of the workers' summed selections, up to this
// many times k of them (all of them where fewer). At 1 (Ok-Topk's k) a ViT at 8 workers ended 1.41
// +- 0.66 points below the all-gather over 3 paired seeds, whose update holds every worker's k (up
// to W k); at 3, 0.28 +- 0.53 (docs/RESULTS.md). A worker's link then carries about (1 + 3) (W - 1)/W
// k pairs, within Ok-Topk's bound of 6 (W - 1)/W k.
constexpr int kSparseAllreduceKeep = 3;
// gs::Error naming the choices for an unknown name; `setting` names it in the caller's words.
ExchangeMode exchange_mode(std::string_view name, std::string_view setting);
std::string_view to_string(ExchangeMode mode);
// The exchange a step runs: `mode` itself, or for automatic the one of fewer link bytes per worker
// at `workers` and `density` (the same on every worker): the all-gather carries (W - 1) k pairs of
// about 4 + (log2(1/density) + 2) / 8 bytes (Rice-coded gaps), the sparse all-reduce about
// (1 + min(kSparseAllreduceKeep, W)) (W - 1)/W k pairs of 8: the sparse all-reduce from 7 workers
// at density 0.01 and 0.1 (from 6 at 0.001, 8 at 0.3), the all-gather below. `sparse`:
// whether the compressor sends a sparse selection with error feedback (without one, automatic is
// its own exchange: allgather here).
ExchangeMode resolve_exchange(ExchangeMode mode, int workers, double density, bool sparse);

// How an option is spelled in messages: as a command-line flag (--bits) or as the keyword of
// Python and JSON (bits).
enum class OptionSpelling { flag, keyword };
// The flags of the options whose value in `o` differs from a default CompressorOptions: the ones
// a config sets.
std::vector<std::string> options_set(const CompressorOptions& o);
// gs::Error when `given` (flags of compressor_option_rows()) holds an option the compressor `name`
// does not read (CompressorInfo::options), naming it and the ones it reads: an option that does
// nothing is a mistake to report, not to ignore. `also`: options the caller reads itself whatever
// the method (the DDP hook places its buckets by --backend).
void check_options_read(std::string_view name, std::span<const std::string> given,
                        std::span<const std::string_view> also = {}, OptionSpelling spelling = OptionSpelling::flag);

}  // namespace gs::compress
