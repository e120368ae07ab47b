// Option tables (gs/base/option_table.hpp): every kind of value reads what it writes, refuses text
// that is no such value in one message naming the flag, checks its range and choices, and a row of
// an inner config works on the outer one.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>

#include "common/error_message.hpp"
#include "gs/base/option_table.hpp"
#include "gs/base/error.hpp"

namespace {

using gs::testing::error_message;

struct Inner {
  double alpha = 0.5;
};

struct Config {
  std::string name = "a";
  std::filesystem::path out = "x.h5";
  std::int64_t count = 3;
  std::uint64_t seed = 1;
  double rate = 0.25;
  bool on = false;
  std::vector<int> bits{6, 10};
  std::vector<double> ratios{0.1, 0.01};
  std::vector<std::string> names{"x", "y"};
  Inner inner;
};

#define FIELD(expr) \
  [](auto& c) -> auto& { return expr; }

std::vector<gs::OptionRow<Config>> table() {
  return {
      gs::option_row<std::string, Config>("--name", "a name", FIELD(c.name), {}, {"a", "b"}),
      gs::option_row<std::filesystem::path, Config>("--out", "a file", FIELD(c.out)),
      gs::option_row<std::int64_t, Config>("--count", "a count", FIELD(c.count),
                                           [](const std::int64_t& v) {
                                             if (v < 1) throw gs::Error("--count must be at least 1");
                                           }),
      gs::option_row<std::uint64_t, Config>("--seed", "a seed", FIELD(c.seed)),
      gs::option_row<double, Config>("--rate-of-fire", "a real", FIELD(c.rate)),
      gs::option_row<bool, Config>("--on", "a switch", FIELD(c.on)),
      gs::option_row<std::vector<int>, Config>("--bits", "a list", FIELD(c.bits)),
      gs::option_row<std::vector<double>, Config>("--ratios", "reals", FIELD(c.ratios)),
      gs::option_row<std::vector<std::string>, Config>("--names", "words", FIELD(c.names)),
      gs::nested_row<Config>(gs::option_row<double, Inner>("--alpha", "inner", FIELD(c.alpha),
                                                           [](const double& v) {
                                                             if (!(v > 0)) throw gs::Error("--alpha must be positive");
                                                           }),
                             FIELD(c.inner)),
  };
}

const gs::OptionRow<Config>& row(const std::vector<gs::OptionRow<Config>>& t, const std::string& flag) {
  for (const auto& r : t)
    if (r.flag == flag) return r;
  throw std::logic_error("no row " + flag);
}

TEST(OptionTable, EveryKindReadsWhatItWrites) {
  const auto t = table();
  Config c;
  const std::pair<const char*, const char*> values[] = {{"--name", "b"},
                                                        {"--out", "dir/y.h5"},
                                                        {"--count", "-7"},
                                                        {"--seed", "18446744073709551615"},
                                                        {"--rate-of-fire", "0.1"},
                                                        {"--on", "1"},
                                                        {"--bits", "2,4,8"},
                                                        {"--alpha", "1e-300"},
                                                        {"--ratios", "0.5,0.001,1e-300"},
                                                        {"--names", "gamma,top-k"}};
  for (const auto& [flag, text] : values) {
    row(t, flag).set(c, text);
    EXPECT_EQ(row(t, flag).get(c), text) << flag;
  }
  EXPECT_EQ(c.out, std::filesystem::path("dir/y.h5"));
  EXPECT_EQ(c.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(c.bits, (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(c.ratios, (std::vector<double>{0.5, 0.001, 1e-300}));
  EXPECT_EQ(c.names, (std::vector<std::string>{"gamma", "top-k"}));
  EXPECT_EQ(c.inner.alpha, 1e-300);
  // A real's text is the shortest that reads back exactly.
  c.rate = 0.1 + 0.2;
  Config back;
  row(t, "--rate-of-fire").set(back, row(t, "--rate-of-fire").get(c));
  EXPECT_EQ(back.rate, c.rate);
  row(t, "--on").set(c, "false");
  EXPECT_FALSE(c.on);
  row(t, "--bits").set(c, "");
  EXPECT_TRUE(c.bits.empty());
  row(t, "--names").set(c, "");
  EXPECT_TRUE(c.names.empty());
}

TEST(OptionTable, TextThatIsNoSuchValueNamesTheFlag) {
  const auto t = table();
  Config c;
  const std::pair<const char*, const char*> bad[] = {
      {"--count", "3x"},      {"--count", ""}, {"--count", "1.5"}, {"--seed", "-1"},  {"--rate-of-fire", "fast"},
      {"--rate-of-fire", ""}, {"--on", "yes"}, {"--bits", "2,,4"}, {"--alpha", "1e"}, {"--ratios", "0.1,x"}};
  for (const auto& [flag, text] : bad) {
    const std::string msg = error_message([&] { row(t, flag).set(c, text); });
    EXPECT_EQ(msg.rfind(flag, 0), 0u) << flag << " '" << text << "': " << msg;
    // The text quoted (a list's bad item alone).
    const std::string f = flag;
    const std::string quoted = f == "--bits" ? "''" : f == "--ratios" ? "'x'" : "'" + std::string(text) + "'";
    EXPECT_NE(msg.find(quoted), std::string::npos) << msg;
  }
  EXPECT_EQ(c.count, 3);  // nothing changed
}

TEST(OptionTable, RangesAndChoicesAreChecked) {
  const auto t = table();
  Config c;
  for (const auto& r : t) EXPECT_NO_THROW(r.check(c)) << r.flag;
  c.name = "z";
  EXPECT_EQ(error_message([&] { row(t, "--name").check(c); }), "--name 'z' is not one of a, b");
  c.count = 0;
  EXPECT_EQ(error_message([&] { row(t, "--count").check(c); }), "--count must be at least 1");
  c.inner.alpha = 0;
  EXPECT_EQ(error_message([&] { row(t, "--alpha").check(c); }), "--alpha must be positive");
  EXPECT_EQ(row(t, "--rate-of-fire").key(), "rate_of_fire");
  EXPECT_EQ(row(t, "--bits").kind, gs::ValueKind::int_list);
  EXPECT_EQ(row(t, "--ratios").kind, gs::ValueKind::real_list);
  EXPECT_EQ(row(t, "--names").kind, gs::ValueKind::text_list);
  EXPECT_TRUE(gs::is_list(gs::ValueKind::text_list));
  EXPECT_FALSE(gs::is_list(gs::ValueKind::text));
  EXPECT_EQ(row(t, "--out").kind, gs::ValueKind::text);
}

}  // namespace
