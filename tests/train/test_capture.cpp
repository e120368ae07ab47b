// The capture loop end to end on real Fashion-MNIST: what it records, in which layout, and what
// it refuses. Short MLP runs keep the suite to seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/run_command.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "gs/train/capture.hpp"

namespace fs = std::filesystem;

namespace {

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gs_train_capture_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  gs::train::CaptureConfig mlp(const std::string& file, std::int64_t steps, std::int64_t every) {
    gs::train::CaptureConfig c;
    c.model = "mlp";
    c.steps = steps;
    c.every = every;
    c.batch = 64;
    c.lr = 0.05;
    c.seed = 7;
    c.out = dir_ / file;
    c.test_images = 1000;  // keeps the suite fast; the first 1000 are spread over all classes
    return c;
  }
  fs::path dir_;
};

std::string run_command(const std::string& cmd) { return gs::testing::run_command(cmd).out; }

double mean(const std::vector<double>& v, std::size_t first, std::size_t last) {
  return std::accumulate(v.begin() + first, v.begin() + last, 0.0) / double(last - first);
}

TEST_F(Capture, MlpRecordsEveryKthStepAndLearns) {
  auto config = mlp("mlp.h5", 60, 5);
  std::int64_t calls = 0, last_step = 0;
  const auto result = gs::train::run_capture(config, [&](const gs::train::CaptureProgress& p) {
    ++calls;
    EXPECT_EQ(p.step, last_step + 1);
    last_step = p.step;
    EXPECT_EQ(p.steps, 60);
  });
  EXPECT_EQ(calls, 60);
  EXPECT_EQ(result.steps, 60);
  EXPECT_EQ(result.recorded_steps, 12);
  ASSERT_EQ(result.losses.size(), 60u);
  // Loss falls: the last ten steps average well below the first ten (about 2.3 at the start).
  const double first = mean(result.losses, 0, 10), last = mean(result.losses, 50, 60);
  EXPECT_GT(first, 1.5);
  EXPECT_LT(last, 0.8 * first) << "first " << first << " last " << last;
  // 60 steps already classify far above chance (0.1).
  EXPECT_GT(result.test_accuracy, 0.5);
  EXPECT_EQ(result.test_images, 1000);
  EXPECT_LE(result.test_accuracy, 1.0);
  EXPECT_TRUE(std::isfinite(result.recording_overhead_s));
  EXPECT_GT(result.seconds_per_step, 0.0);

  gs::data::SnapshotReader reader(config.out);
  EXPECT_EQ(reader.meta().model, "mlp");
  EXPECT_EQ(reader.meta().dataset, "fashion-mnist");
  EXPECT_EQ(reader.meta().seed, 7u);
  ASSERT_EQ(reader.layers().size(), 6u);
  EXPECT_EQ(reader.layers()[0].name, "fc1.weight");
  EXPECT_EQ(reader.layers()[0].shape, (std::vector<std::int64_t>{256, 784}));
  ASSERT_EQ(reader.step_count(), 12u);
  for (std::size_t i = 0; i < reader.step_count(); ++i) {
    const auto& rec = reader.steps()[i];
    EXPECT_EQ(rec.step, static_cast<std::int64_t>(5 * i));
    EXPECT_EQ(rec.loss, result.losses[static_cast<std::size_t>(rec.step)]);
    EXPECT_EQ(rec.lr, 0.05);
    for (std::size_t l = 0; l < reader.layers().size(); ++l) {
      const auto g = reader.read(i, l);
      ASSERT_EQ(static_cast<std::int64_t>(g.size()), reader.layers()[l].numel());
      std::size_t nonzero = 0;
      for (float v : g) {
        ASSERT_TRUE(std::isfinite(v)) << reader.layers()[l].name << " step " << rec.step;
        nonzero += v != 0.0f;
      }
      EXPECT_GT(nonzero, 0u) << reader.layers()[l].name << " step " << rec.step;
    }
  }
}

TEST_F(Capture, FileLayoutMatchesTheDocumentedFormat) {
  auto config = mlp("layout.h5", 12, 4);
  gs::train::run_capture(config);
  const std::string header = run_command("h5dump -H '" + config.out.string() + "' 2>&1");
  for (const char* needle : {"GROUP \"layers\"",
                             "GROUP \"fc1.weight\"",
                             "GROUP \"fc3.bias\"",
                             "DATASET \"grad\"",
                             "DATASET \"step\"",
                             "DATASET \"steps\"",
                             "ATTRIBUTE \"format\"",
                             "ATTRIBUTE \"format_version\"",
                             "ATTRIBUTE \"model\"",
                             "ATTRIBUTE \"dataset\"",
                             "ATTRIBUTE \"seed\"",
                             "ATTRIBUTE \"created\"",
                             "ATTRIBUTE \"gradscope_version\"",
                             "ATTRIBUTE \"shape\"",
                             "H5T_IEEE_F32LE",
                             "( 3, 200704 )",
                             "( 3, 10 )",
                             "H5T_STD_I64LE \"step\"",
                             "H5T_IEEE_F64LE \"loss\"",
                             "H5T_IEEE_F64LE \"lr\""})
    EXPECT_NE(header.find(needle), std::string::npos) << "missing " << needle << " in\n" << header;
  // Each layer's step dataset lists exactly the recorded steps.
  const std::string steps = run_command("h5dump -y -d /layers/fc2.weight/step '" + config.out.string() + "' 2>&1");
  const auto data = steps.find("DATA {");
  ASSERT_NE(data, std::string::npos) << steps;
  std::string values = steps.substr(data + 6, steps.find('}', data) - data - 6);
  for (char& c : values)
    if (c == ',') c = ' ';
  std::istringstream in(values);
  std::vector<long> got{std::istream_iterator<long>(in), std::istream_iterator<long>()};
  EXPECT_EQ(got, (std::vector<long>{0, 4, 8})) << steps;
}

TEST_F(Capture, SameSeedGivesBitIdenticalGradients) {
  auto a = mlp("a.h5", 20, 10), b = mlp("b.h5", 20, 10), c = mlp("c.h5", 20, 10);
  c.seed = 8;
  const auto ra = gs::train::run_capture(a);
  const auto rb = gs::train::run_capture(b);
  const auto rc = gs::train::run_capture(c);
  EXPECT_EQ(ra.losses, rb.losses);
  EXPECT_NE(ra.losses, rc.losses);
  EXPECT_EQ(ra.test_accuracy, rb.test_accuracy);
  gs::data::SnapshotReader fa(a.out), fb(b.out), fc(c.out);
  ASSERT_EQ(fa.step_count(), 2u);
  ASSERT_EQ(fb.step_count(), 2u);
  for (std::size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(fa.read_model(s), fb.read_model(s)) << "step index " << s;
    EXPECT_NE(fa.read_model(s), fc.read_model(s)) << "step index " << s;
  }
}

TEST_F(Capture, CnnAndLstmRecordEveryLayer) {
  for (const std::string model : {"cnn", "lstm"}) {
    auto config = mlp(model + ".h5", 3, 1);
    config.model = model;
    config.batch = 16;
    const auto result = gs::train::run_capture(config);
    EXPECT_EQ(result.recorded_steps, 3);
    EXPECT_TRUE(std::isnan(result.recording_overhead_s));  // every step recorded: no baseline
    gs::data::SnapshotReader reader(config.out);
    EXPECT_EQ(reader.meta().model, model);
    ASSERT_EQ(reader.step_count(), 3u);
    EXPECT_EQ(reader.layers().size(), model == "cnn" ? 8u : 6u);
    for (std::size_t l = 0; l < reader.layers().size(); ++l) {
      const auto g = reader.read(2, l);
      EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); }));
      EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }))
          << model << " " << reader.layers()[l].name;
    }
  }
}

TEST_F(Capture, RefusesToOverwriteWithoutForce) {
  auto config = mlp("kept.h5", 2, 1);
  { std::ofstream(config.out) << "precious"; }
  bool called = false;
  try {
    gs::train::run_capture(config, [&](const auto&) { called = true; });
    FAIL() << "overwrote without force";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("kept.h5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(called) << "training started before the refusal";
  std::string content;
  std::getline(std::ifstream(config.out), content);
  EXPECT_EQ(content, "precious");

  config.force = true;
  const auto result = gs::train::run_capture(config);
  EXPECT_EQ(result.recorded_steps, 2);
  EXPECT_EQ(gs::data::SnapshotReader(config.out).step_count(), 2u);
}

TEST_F(Capture, UnknownModelNamesTheChoices) {
  auto config = mlp("x.h5", 2, 1);
  config.model = "transformer";
  try {
    gs::train::run_capture(config);
    FAIL() << "accepted an unknown model";
  } catch (const gs::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp, cnn, lstm"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(config.out));
}

TEST_F(Capture, MissingDirectoryFailsBeforeTraining) {
  auto config = mlp("x.h5", 2, 1);
  config.out = dir_ / "no" / "such" / "dir" / "x.h5";
  bool called = false;
  EXPECT_THROW(gs::train::run_capture(config, [&](const auto&) { called = true; }), gs::Error);
  EXPECT_FALSE(called);
}

TEST_F(Capture, InvalidSettingsAreRejected) {
  const auto base = mlp("x.h5", 2, 1);
  auto bad = [&](auto edit) {
    auto c = base;
    edit(c);
    EXPECT_THROW(c.validate(), gs::Error);
    EXPECT_THROW(gs::train::run_capture(c), gs::Error);
  };
  bad([](auto& c) { c.steps = 0; });
  bad([](auto& c) { c.every = 0; });
  bad([](auto& c) { c.batch = 0; });
  bad([](auto& c) { c.batch = 60001; });
  bad([](auto& c) { c.lr = -0.1; });
  bad([](auto& c) { c.lr = std::nan(""); });
  bad([](auto& c) { c.momentum = 1.0; });
  bad([](auto& c) { c.threads = 0; });
  bad([](auto& c) { c.deflate_level = 10; });
  bad([](auto& c) { c.test_images = 10001; });
  bad([](auto& c) { c.out.clear(); });
  EXPECT_NO_THROW(base.validate());
  EXPECT_FALSE(fs::exists(base.out));
}

}  // namespace
