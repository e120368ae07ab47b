// `gradscope info` on a small written file: JSON on stdout (and nothing else there), text mode,
// and a clear error for a bad file.
#include <nlohmann/json.hpp>

#include <fstream>

#include "common/run_command.hpp"
#include "data/data_test_util.hpp"

namespace gs::data::test {
namespace {

using CliRun = gs::testing::CommandRun;

CliRun run_cli(const std::string& args, const std::filesystem::path& stderr_file) {
  return gs::testing::run_command(std::string("'") + GS_GRADSCOPE_BIN + "' " + args + " 2>'" + stderr_file.string() +
                                  "'");
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(InfoCli, JsonDescribesTheFile) {
  ScratchDir dir;
  const auto path = dir / "small.h5";
  const auto layers = odd_layers();
  const std::vector<double> losses{2.3, 1.7, 1.9, 1.2};
  {
    SnapshotMeta meta;
    meta.model = "mlp";
    meta.dataset = "fashion-mnist";
    meta.seed = 17;
    SnapshotWriter writer(path, meta, layers);
    for (std::size_t s = 0; s < losses.size(); ++s) {
      std::vector<std::vector<float>> g;
      std::vector<std::span<const float>> spans;
      for (std::size_t l = 0; l < layers.size(); ++l)
        g.push_back(synthetic_grad(17, static_cast<std::int64_t>(s), l, layers[l].numel()));
      for (const auto& v : g) spans.emplace_back(v);
      writer.append({static_cast<std::int64_t>(100 + 25 * s), losses[s], 0.1}, spans);
    }
  }
  const CliRun r = run_cli("info --json '" + path.string() + "'", dir / "err.txt");
  ASSERT_EQ(r.status, 0) << slurp(dir / "err.txt");
  const auto j = nlohmann::json::parse(r.out);  // throws (failing the test) if not pure JSON
  EXPECT_EQ(j["format"], "gradscope-snapshot");
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["model"], "mlp");
  EXPECT_EQ(j["seed"], 17);
  ASSERT_EQ(j["layers"].size(), layers.size());
  EXPECT_EQ(j["layers"][0]["name"], "conv1.weight");
  EXPECT_EQ(j["layers"][0]["numel"], 600);
  EXPECT_EQ(j["layers"][2]["shape"].size(), 0u);
  EXPECT_EQ(j["steps"]["count"], 4);
  EXPECT_EQ(j["steps"]["first"], 100);
  EXPECT_EQ(j["steps"]["last"], 175);
  EXPECT_EQ(j["steps"]["every"], 25);
  EXPECT_EQ(j["loss"]["first"], 2.3);
  EXPECT_EQ(j["loss"]["last"], 1.2);
  EXPECT_EQ(j["loss"]["min"], 1.2);
  ASSERT_EQ(j["loss"]["trajectory"].size(), 4u);
  EXPECT_EQ(j["loss"]["trajectory"][1][0], 125);
  EXPECT_EQ(j["loss"]["trajectory"][1][1], 1.7);
  EXPECT_EQ(j["file_bytes"], std::filesystem::file_size(path));
  EXPECT_GT(j["compression_ratio"].get<double>(), 0.5);

  const CliRun text = run_cli("info '" + path.string() + "'", dir / "err.txt");
  ASSERT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("fc.weight"), std::string::npos);
  EXPECT_NE(text.out.find("every 25"), std::string::npos);
}

TEST(InfoCli, BadFileIsOneErrorLineAndNonZeroExit) {
  ScratchDir dir;
  const auto path = dir / "notes.h5";
  std::ofstream(path) << "hello\n";
  const CliRun r = run_cli("info --json '" + path.string() + "'", dir / "err.txt");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  const std::string err = slurp(dir / "err.txt");
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("not an HDF5 file"), std::string::npos) << err;
}

}  // namespace
}  // namespace gs::data::test
