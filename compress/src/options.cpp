// The compressor options as an option table. Their ranges are checked where a compressor is made
// (make_compressor names the option at fault), so the rows only parse. Which options a compressor
// reads is its registry row's (CompressorInfo::options); check_options_read refuses the others.
#include <algorithm>

#include "gs/base/join.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/base/error.hpp"

namespace gs::compress {
namespace {

using Row = OptionRow<CompressorOptions>;
#define GS_OPTION(expr) \
  [](auto& o) -> auto& { return expr; }

std::vector<Row> make_rows() {
  std::vector<Row> t;
  t.push_back(option_row<std::uint64_t, CompressorOptions>(
      "--seed", "seed of the random choices (random-k, DGC's sample, the quantizers' rounding)", GS_OPTION(o.seed)));
  t.push_back(option_row<std::string, CompressorOptions>(
      "--backend", "kernels backend (thresholds and selection, fft transforms): auto, cpu or cuda",
      GS_OPTION(o.backend), {}, {"auto", "cpu", "cuda", "cuda-host"}));
  t.push_back(option_row<int, CompressorOptions>(
      "--stages", "SIDCo stages: 0 by density (1 at 0.1, 2 at 0.01, 3 at 0.001; adapted as published), else fixed",
      GS_OPTION(o.stages)));
  t.push_back(option_row<bool, CompressorOptions>(
      "--sidco-as-published",
      "SIDCo as the paper's code runs it: its adaptive stage count, without the count correction",
      GS_OPTION(o.sidco_as_published)));
  t.push_back(option_row<std::string, CompressorOptions>(
      "--sidco-estimate",
      "SIDCo's threshold: carried (the fit, calibrated by the last step's count of the same tensor) or fit alone",
      GS_OPTION(o.sidco_estimate), {}, {"carried", "fit"}));
  t.push_back(option_row<std::vector<int>, CompressorOptions>(
      "--bits", "qsgd-mn*: bits per scale, ascending, e.g. 4 (qsgd-mn), 6,10 (-ts), 4,6,8,10 (-ms)",
      GS_OPTION(o.quant_bits)));
  t.push_back(option_row<double, CompressorOptions>(
      "--variance-alpha", "variance: send an element when r^2 > alpha * v", GS_OPTION(o.variance_alpha)));
  t.push_back(option_row<double, CompressorOptions>("--variance-zeta", "variance: decay of v for elements not sent",
                                                    GS_OPTION(o.variance_zeta)));
  t.push_back(option_row<int, CompressorOptions>("--fft-exponent-bits",
                                                 "fft: exponent bits of the kept coefficients' float layout",
                                                 GS_OPTION(o.fft_exponent_bits)));
  t.push_back(option_row<int, CompressorOptions>("--fft-mantissa-bits",
                                                 "fft: mantissa bits of the kept coefficients' float layout",
                                                 GS_OPTION(o.fft_mantissa_bits)));
  t.push_back(option_row<std::uint64_t, CompressorOptions>(
      "--fft-chunk", "fft: real FFT length (0: the method's default)", GS_OPTION(o.fft_chunk)));
  return t;
}

#undef GS_OPTION

}  // namespace

const std::vector<Row>& compressor_option_rows() {
  static const std::vector<Row> rows = make_rows();
  return rows;
}

std::vector<std::string> options_set(const CompressorOptions& o) {
  const CompressorOptions defaults;
  std::vector<std::string> flags;
  for (const Row& r : compressor_option_rows())
    if (r.get(o) != r.get(defaults)) flags.push_back(r.flag);
  return flags;
}

void check_options_read(std::string_view name, std::span<const std::string> given,
                        std::span<const std::string_view> also, OptionSpelling spelling) {
  const CompressorInfo& info = compressor_info(name);
  auto listed = [](auto&& list, std::string_view flag) {
    return std::find(list.begin(), list.end(), flag) != list.end();
  };
  auto reads = [&](std::string_view flag) { return listed(info.options, flag) || listed(also, flag); };
  auto spell = [&](const Row& r) { return spelling == OptionSpelling::flag ? r.flag : r.key(); };
  for (const Row& r : compressor_option_rows()) {
    if (!listed(given, r.flag) || reads(r.flag)) continue;
    std::vector<std::string> read;  // in the table's order
    for (const Row& o : compressor_option_rows())
      if (reads(o.flag)) read.push_back(spell(o));
    throw Error(spell(r) + " does nothing for compressor '" + std::string(name) + "': drop it (" + std::string(name) +
                " reads " + (read.empty() ? std::string("no option") : join(read, ", ")) + ")");
  }
  for (const std::string& flag : given)
    if (std::none_of(compressor_option_rows().begin(), compressor_option_rows().end(),
                     [&](const Row& r) { return r.flag == flag; }))
      throw Error("no compressor option " + flag);
}

}  // namespace gs::compress
