// Which options each compressor reads (CompressorInfo::options, the registry's truth that
// `gradscope train`, gradscope.select and gradscope.ddp.State refuse the others by): every option
// listed is a row of the option table, an option a compressor does not list changes nothing it
// sends, and check_options_read refuses exactly the unlisted ones, naming those it reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;
using gs::testing::error_message;

namespace {

const std::vector<TensorSpec> kModel = {{"fc1.weight", 3000}, {"fc1.bias", 30}};

// A value away from the default for every row of the option table.
CompressorOptions with_changed(const std::string& flag) {
  CompressorOptions o;
  const auto& rows = compressor_option_rows();
  const auto row = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.flag == flag; });
  const std::string text = flag == "--backend"              ? "cuda-host"
                           : flag == "--bits"               ? "3"
                           : flag == "--stages"             ? "2"
                           : flag == "--variance-alpha"     ? "1.5"
                           : flag == "--variance-zeta"      ? "0.5"
                           : flag == "--fft-exponent-bits"  ? "5"
                           : flag == "--fft-mantissa-bits"  ? "9"
                           : flag == "--fft-chunk"          ? "512"
                           : flag == "--sidco-as-published" ? "1"
                           : flag == "--sidco-estimate"     ? "fit"
                                                            : "7";  // --seed
  row->set(o, text);
  return o;
}

// Three steps of one worker; the updates it applies.
std::vector<std::vector<float>> run(std::string_view name, const CompressorOptions& o) {
  ModelCompressor mc(kModel, Granularity::layer, 0, make_compressor(name, density_based(name) ? 0.05 : 1.0, o));
  SoloCollectives solo;
  std::vector<std::vector<float>> out;
  for (std::uint64_t s = 0; s < 3; ++s) {
    std::mt19937_64 rng(s);
    std::normal_distribution<float> d(0.0f, 0.01f);
    std::vector<float> g(mc.numel()), u(mc.numel());
    for (auto& v : g) v = d(rng) * (rng() % 16 == 0 ? 20.0f : 1.0f);
    if (mc.compressor().needs_gradient_variance()) {
      std::vector<float> v(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) v[i] = 2.0f * g[i] * g[i];
      mc.set_gradient_variance(v);
    }
    mc.step(g, solo, u);
    out.push_back(u);
  }
  return out;
}

bool lists(const CompressorInfo& row, const std::string& flag) {
  return std::find(row.options.begin(), row.options.end(), flag) != row.options.end();
}

}  // namespace

TEST(OptionsRead, EveryListedOptionIsARowOfTheTable) {
  for (const auto& row : compressor_registry())
    for (auto flag : row.options) {
      const auto& rows = compressor_option_rows();
      EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.flag == flag; }))
          << row.name << ": " << flag;
    }
  // Spot checks of the table's knowledge.
  EXPECT_TRUE(lists(compressor_info("sidco-e"), "--stages"));
  EXPECT_FALSE(lists(compressor_info("sidco-e"), "--seed"));
  EXPECT_TRUE(lists(compressor_info("dgc"), "--seed"));
  EXPECT_TRUE(lists(compressor_info("qsgd-mn"), "--bits"));
  EXPECT_FALSE(lists(compressor_info("qsgd-mn"), "--stages"));
  EXPECT_TRUE(compressor_info("none").options.empty());
}

// The truth of the lists: an option a compressor does not list, set away from its default, leaves
// every update it makes as it was.
TEST(OptionsRead, AnUnlistedOptionChangesNothing) {
  for (const auto name : compressor_names())
    for (const auto& r : compressor_option_rows()) {
      if (lists(compressor_info(name), r.flag)) continue;
      SCOPED_TRACE(std::string(name) + " " + r.flag);
      EXPECT_EQ(run(name, with_changed(r.flag)), run(name, CompressorOptions{}));
    }
}

TEST(OptionsRead, UnreadOptionsAreRefusedNamingWhatIsRead) {
  const std::vector<std::string> bits = {"--bits"};
  const std::string msg = error_message([&] { check_options_read("sidco-e", bits); });
  EXPECT_EQ(msg,
            "--bits does nothing for compressor 'sidco-e': drop it (sidco-e reads --backend, --stages, "
            "--sidco-as-published, --sidco-estimate)");
  EXPECT_NE(error_message([&] { check_options_read("sidco-e", bits, {}, OptionSpelling::keyword); })
                .find("bits does nothing for compressor 'sidco-e': drop it (sidco-e reads backend, stages, "
                      "sidco_as_published, sidco_estimate)"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              check_options_read("none", std::vector<std::string>{"--seed"});
            }).find("(none reads no option)"),
            std::string::npos);
  // What a compressor reads passes, and so does what the caller reads itself.
  EXPECT_NO_THROW(check_options_read("qsgd-mn", std::vector<std::string>{"--bits", "--seed"}));
  const std::string_view backend[] = {"--backend"};
  EXPECT_NO_THROW(check_options_read("qsgd-mn", std::vector<std::string>{"--backend"}, backend));
  EXPECT_THROW(check_options_read("qsgd-mn", std::vector<std::string>{"--backend"}), gs::Error);
}

TEST(OptionsRead, OptionsSetAreThoseAwayFromTheirDefault) {
  EXPECT_TRUE(options_set(CompressorOptions{}).empty());
  CompressorOptions o;
  o.quant_bits = {3};
  o.seed = 9;
  EXPECT_EQ(options_set(o), (std::vector<std::string>{"--seed", "--bits"}));  // the table's order
}
