// The threshold-method table: every row is checked here, so a new row is tested as soon as it
// exists (its rule on the data, its name in the lists and errors, its colour).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "common/error_message.hpp"
#include "common/naive_passes.hpp"
#include "common/random_data.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/report.hpp"
#include "gs/fitting/threshold_methods.hpp"

using gs::testing::error_message;
using gs::testing::NaivePasses;

TEST(ThresholdMethods, RowsAreUniqueAndDescribed) {
  std::set<std::string_view> names;
  std::set<std::uint32_t> colours;
  int exact = 0;
  for (const auto& row : gs::fitting::threshold_methods()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_TRUE(colours.insert(row.colour).second) << row.name << ": shares a colour";
    EXPECT_LE(row.colour, 0xffffffu) << row.name;
    EXPECT_FALSE(row.summary.empty()) << row.name;
    EXPECT_NE(row.rule, nullptr) << row.name;
    exact += row.kind == gs::fitting::ThresholdKind::exact;
  }
  EXPECT_EQ(exact, 1);  // the one reference the plots judge the others against
  EXPECT_EQ(gs::fitting::all_methods(), gs::fitting::threshold_method_names());
  EXPECT_EQ(gs::fitting::threshold_method("sidco-e").name, "sidco-e");
}

// SIDCo's variants and their rows name each other: one row per variant.
TEST(ThresholdMethods, SidcoVariantsNameTheirRows) {
  for (auto v : {gs::fitting::SidcoVariant::exponential, gs::fitting::SidcoVariant::pareto,
                 gs::fitting::SidcoVariant::gamma_pareto}) {
    const auto& row = gs::fitting::threshold_method(gs::fitting::method_name(v));
    EXPECT_EQ(row.kind, gs::fitting::ThresholdKind::sidco);
    EXPECT_EQ(row.variant, v);
  }
}

TEST(ThresholdMethods, UnknownNameListsTheKnownOnes) {
  std::vector<float> v = gs::testing::laplace(100, 3);
  NaivePasses passes(v);
  const std::string by_name = error_message([&] { gs::fitting::threshold_by_name("topq", passes, 0.1, 1, 0); });
  gs::fitting::FitReportOptions o;
  o.methods = {"topq"};
  const std::string report = error_message([&] { gs::fitting::fit_report(passes, o); });
  for (const auto& msg : {by_name, report}) {
    EXPECT_NE(msg.find("unknown threshold method 'topq'"), std::string::npos) << msg;
    for (const auto& name : gs::fitting::threshold_method_names())
      EXPECT_NE(msg.find(name), std::string::npos) << name << " missing from: " << msg;
  }
}

// Every rule, by its name, on Laplace data with non-finite values: it reports its row's name,
// keeps about the density, never a non-finite value, and an exact rule keeps k.
TEST(ThresholdMethods, EveryRuleAimsAtTheDensity) {
  std::vector<float> g = gs::testing::laplace(100000, 11);
  g[5] = std::numeric_limits<float>::quiet_NaN();
  g[9] = -std::numeric_limits<float>::infinity();
  NaivePasses passes(g);
  for (const auto& row : gs::fitting::threshold_methods()) {
    for (double density : {0.1, 0.01}) {
      SCOPED_TRACE(std::string(row.name) + " at " + std::to_string(density));
      const gs::fitting::ThresholdResult r = gs::fitting::threshold_by_name(row.name, passes, density, 3, 5);
      EXPECT_EQ(r.method, row.name);
      EXPECT_EQ(r.density, density);
      EXPECT_TRUE(std::isfinite(r.threshold));
      EXPECT_GT(r.quality, 0.3);  // the crude baselines (GaussianKSGD, RedSync) land within 2.5x
      EXPECT_LT(r.quality, 2.5);
      if (r.exact || row.kind == gs::fitting::ThresholdKind::exact) {
        EXPECT_TRUE(r.exact);
        EXPECT_EQ(r.selected, gs::fitting::target_count(g.size(), density));
      }
    }
  }
}
