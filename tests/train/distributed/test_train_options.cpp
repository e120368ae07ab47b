// The option table of `gradscope train` (train/distributed/src/config.cpp), directly: each row reads what
// it writes, ranges are refused in one line naming the flag, the options capture shares have the
// same ranges there, and the worker line round-trips through the table.
#include <gtest/gtest.h>

#include <string>

#include "common/error_message.hpp"
#include "gs/base/error.hpp"
#include "gs/distributed/config.hpp"
#include "gs/train/capture.hpp"

namespace {

using gs::distributed::TrainConfig;

// A config parsed from "--flag value ..." arguments through the table, as the CLI and a worker do.
TrainConfig parse(const std::vector<std::string>& args) {
  TrainConfig c;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& row = gs::distributed::train_option(args[i]);
    if (row.kind == gs::ValueKind::flag)
      row.set(c, "1");
    else
      row.set(c, args.at(++i));
  }
  return c;
}

TEST(TrainOptions, EveryRowReadsWhatItWrites) {
  TrainConfig c;
  c.density = 0.1 + 0.2;
  c.compression.quant_bits = {3, 5};
  c.checkpoint = "dir";
  for (const auto& row : gs::distributed::train_options()) {
    TrainConfig back;
    row.set(back, row.get(c));
    EXPECT_EQ(row.get(back), row.get(c)) << row.flag;
  }
  EXPECT_THROW(gs::distributed::train_option("--no-such"), gs::Error);
}

TEST(TrainOptions, OutOfRangeValuesAreRefusedNamingTheFlag) {
  const std::pair<const char*, const char*> bad[] = {{"--ratio", "0"},
                                                     {"--ratio", "1.5"},
                                                     {"--workers", "0"},
                                                     {"--batch", "0"},
                                                     {"--batch", "60001"},
                                                     {"--lr", "0"},
                                                     {"--lr", "inf"},
                                                     {"--momentum", "1"},
                                                     {"--momentum", "-0.1"},
                                                     {"--model", "resnet"},
                                                     {"--compressor", "zip"},
                                                     {"--epochs", "0"},
                                                     {"--steps", "-1"},
                                                     {"--timeout", "0"},
                                                     {"--keep-checkpoints", "0"},
                                                     {"--checkpoint-every", "-1"},
                                                     {"--granularity", "tensor"}};
  for (const auto& [flag, text] : bad) {
    TrainConfig c;
    gs::distributed::train_option(flag).set(c, text);
    const std::string msg = gs::testing::error_message([&] { c.validate(); });
    EXPECT_EQ(msg.rfind(flag, 0), 0u) << flag << " " << text << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(TrainConfig{}.validate());
}

// A compressor option the method does not read would do nothing: `gradscope train --compressor
// sidco-e --bits 3` is refused naming the flag and what sidco-e reads (the registry's list, the
// rule gradscope.select and gradscope.ddp.State apply too); one the method reads passes.
TEST(TrainOptions, CompressorOptionsTheMethodDoesNotReadAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--compressor", "sidco-e", "--bits", "3"}, "--bits does nothing for compressor 'sidco-e'"},
      {{"--compressor", "topk", "--stages", "2"}, "--stages does nothing for compressor 'topk'"},
      {{"--compressor", "qsgd-mn", "--backend", "auto"}, "--backend does nothing for compressor 'qsgd-mn'"},
      {{"--compressor", "none", "--variance-alpha", "2"}, "(none reads no option)"}};
  for (const auto& [args, words] : refused) {
    const std::string msg = gs::testing::error_message([&] { parse(args).validate(); });
    EXPECT_NE(msg.find(words), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_NE(gs::testing::error_message([&] {
              parse({"--bits", "3"}).validate();
            }).find("(sidco-e reads --backend, --stages, --sidco-as-published, --sidco-estimate)"),
            std::string::npos);
  EXPECT_NO_THROW(parse({"--compressor", "qsgd-mn", "--bits", "3"}).validate());
  EXPECT_NO_THROW(parse({"--compressor", "sidco-e", "--stages", "2", "--backend", "cpu"}).validate());
  EXPECT_NO_THROW(parse({"--compressor", "fft", "--fft-chunk", "512"}).validate());
  // The default value of an option is no setting: a worker's line carries every option.
  EXPECT_NO_THROW(parse({"--compressor", "topk", "--stages", "0"}).validate());
}

// A compressor whose ratio is not a density runs at 1 (compress::density_for, the rule
// gradscope.ddp.State applies too): a --ratio other than 1 would do nothing and is refused naming
// the flag; the default or 1 passes and the run's density is 1.
TEST(TrainOptions, ARatioThatDoesNothingIsRefused) {
  for (const char* name : {"none", "qsgd-mn", "variance"}) {
    const std::string msg = gs::testing::error_message([&] {
      parse({"--compressor", name, "--ratio", "0.5"}).validate();
    });
    EXPECT_EQ(msg.rfind("--ratio 0.5 does nothing for compressor '" + std::string(name) + "'", 0), 0u) << msg;
    EXPECT_EQ(parse({"--compressor", name}).run_density(), 1.0) << name;
    EXPECT_EQ(parse({"--compressor", name, "--ratio", "1"}).run_density(), 1.0) << name;
  }
  EXPECT_EQ(parse({"--compressor", "topk", "--ratio", "0.05"}).run_density(), 0.05);
  EXPECT_EQ(parse({"--compressor", "topk"}).run_density(), TrainConfig{}.density);
}

// The density schedule's settings are checked when it is accordion, each naming its flag.
TEST(TrainOptions, DensityScheduleSettingsAreRefusedNamingTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {"--density-schedule", "adaptive"},
      {"--density-schedule", "accordion", "--density-high", "0.005"},
      {"--density-schedule", "accordion", "--density-high", "1.5"},
      {"--density-schedule", "accordion", "--density-interval", "0"},
      {"--density-schedule", "accordion", "--density-eta", "0"},
      {"--density-schedule", "accordion", "--compressor", "none", "--ratio", "1"}};
  for (const auto& args : bad) {
    std::string flag = args[0];
    for (std::size_t i = 2; i < args.size(); i += 2)
      if (args[i] != "--compressor" && args[i] != "--ratio") flag = args[i];
    const std::string msg = gs::testing::error_message([&] {
      TrainConfig c = parse(args);
      c.validate();
    });
    EXPECT_EQ(msg.rfind(flag, 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // A setting of accordion given with the constant schedule does nothing: refused, naming both.
  const std::string constant = gs::testing::error_message([&] { parse({"--density-high", "0.001"}).validate(); });
  EXPECT_EQ(constant.rfind("--density-high is a setting of --density-schedule accordion", 0), 0u) << constant;
  // Off the workers' comparison line while the schedule is constant.
  EXPECT_EQ(parse({}).shared_description().find("density-high"), std::string::npos);
  const TrainConfig a = parse({"--density-schedule", "accordion", "--density-interval", "7"});
  EXPECT_NO_THROW(a.validate());
  EXPECT_NE(a.shared_description().find("density-interval=7"), std::string::npos);
  EXPECT_EQ(parse(a.worker_args(1, 4567)).shared_description(), a.shared_description());
}

// capture takes --model, --batch, --lr, --momentum and --seed from the same rows: the same help,
// and the same values pass and fail in both.
TEST(TrainOptions, CaptureSharesTheRangesOfTrain) {
  for (const char* flag : {"--model", "--batch", "--lr", "--momentum", "--seed"}) {
    const gs::OptionRow<gs::train::CaptureConfig>* cap = nullptr;
    for (const auto& o : gs::train::capture_options())
      if (o.flag == flag) cap = &o;
    ASSERT_NE(cap, nullptr) << flag;
    const gs::distributed::TrainOption& tr = gs::distributed::train_option(flag);
    EXPECT_EQ(cap->help, tr.help) << flag;
    EXPECT_EQ(cap->choices, tr.choices) << flag;
    for (const char* text : {"0", "1", "-1", "0.5", "0.999", "60000", "60001", "nan", "mlp", "cnn", "x"}) {
      auto accepts = [&](const auto& row, auto config) {
        try {
          row.set(config, text);
          row.check(config);
          return true;
        } catch (const gs::Error&) {
          return false;
        }
      };
      EXPECT_EQ(accepts(tr, TrainConfig{}), accepts(*cap, gs::train::CaptureConfig{})) << flag << " " << text;
    }
  }
}

// What the launcher passes each worker parses back, through the same table, into the config the
// worker compares: the same shared line, its own rank, the output only on rank 0.
TEST(TrainOptions, TheWorkerLineRoundTrips) {
  TrainConfig c;
  c.workers = 3;
  c.compressor = "qsgd-mn-ts";
  c.compression.quant_bits = {2, 6};
  c.density = 1.0;  // a quantizer runs at 1 (a ratio other than the default travels too)
  c.lr_schedule = "cosine";
  c.momentum_correction = true;
  c.checkpoint = "/tmp/ck";
  c.checkpoint_every = 5;
  c.keep_checkpoints = 4;
  c.timeout = 2.5;
  c.json = true;
  for (int r = 0; r < 3; ++r) {
    const TrainConfig w = parse(c.worker_args(r, 4567));
    EXPECT_EQ(w.shared_description(), c.shared_description()) << r;
    EXPECT_EQ(w.rank, r);
    EXPECT_EQ(w.master_port, 4567);
    EXPECT_EQ(w.keep_checkpoints, 4);
    EXPECT_EQ(w.timeout, 2.5);
    EXPECT_EQ(w.checkpoint, "/tmp/ck");
    EXPECT_EQ(w.json, r == 0);
    EXPECT_EQ(w.quiet, r != 0);
    EXPECT_EQ(w.max_restarts, 0);  // the launcher's alone
    EXPECT_NO_THROW(w.validate());
  }
  // A setting that matters only with another one stays off the line without it.
  TrainConfig plain;
  EXPECT_EQ(plain.shared_description().find("checkpoint-every"), std::string::npos);
  EXPECT_NE(c.shared_description().find("checkpoint-every=5"), std::string::npos);
  EXPECT_EQ(plain.shared_description().find("keep-checkpoints"), std::string::npos);
  EXPECT_NE(c.shared_description().find("keep-checkpoints=4"), std::string::npos);
}

}  // namespace
