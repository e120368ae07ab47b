// The small helpers every library shares (gs/base/).
#include <gtest/gtest.h>

#include <cmath>

#include "gs/base/bytes.hpp"
#include "gs/base/join.hpp"
#include "gs/base/quantile.hpp"
#include "gs/base/timing.hpp"

namespace {

TEST(Base, QuantileMatchesNumpy) {
  EXPECT_TRUE(std::isnan(gs::quantile({}, 0.5)));
  EXPECT_DOUBLE_EQ(gs::quantile({3.0}, 0.05), 3.0);
  EXPECT_NEAR(gs::quantile({1, 2, 3, 4, 10}, 0.95), 8.8, 1e-12);  // numpy: 8.8
  EXPECT_NEAR(gs::quantile({5, NAN, 1}, 0.5), 3.0, 1e-12);        // NaN ignored
  EXPECT_DOUBLE_EQ(gs::median({4, 1, 3, 2}), 2.5);                // even count: mean of the middle
}

TEST(Base, HumanBytesPicksTheUnit) {
  EXPECT_EQ(gs::human_bytes(0), "0 B");
  EXPECT_EQ(gs::human_bytes(1023), "1023 B");
  EXPECT_EQ(gs::human_bytes(1024), "1.0 KiB");
  EXPECT_EQ(gs::human_bytes(17.3 * 1024), "17.3 KiB");
  EXPECT_EQ(gs::human_bytes(3.6 * 1024 * 1024), "3.6 MiB");
  EXPECT_EQ(gs::human_bytes(2.5 * 1024 * 1024 * 1024), "2.5 GiB");
}

TEST(Base, HumanDurationIsWrittenAsPeopleWriteIt) {
  EXPECT_EQ(gs::human_duration(20.0), "20 s");
  EXPECT_EQ(gs::human_duration(1.5), "1.5 s");
  EXPECT_EQ(gs::human_duration(0.25), "250 ms");
  EXPECT_EQ(gs::human_duration(0.0015), "1.5 ms");
  EXPECT_EQ(gs::human_duration(4e-5), "40 µs");
  EXPECT_EQ(gs::human_duration(0.0), "0 s");
  EXPECT_EQ(gs::human_duration(0.99996), "1 s");  // the unit after rounding, not "1e+03 ms"
  EXPECT_EQ(gs::human_duration(123.456), "123 s");
  EXPECT_EQ(gs::human_duration(1234.4), "1234 s");
}

TEST(Base, SplitListIsJoinsInverse) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(gs::split_list("a,b,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(gs::split_list("a,,b,"), (V{"a", "", "b", ""}));
  EXPECT_EQ(gs::split_list(""), V{});
  EXPECT_EQ(gs::split_list("x=1;y=2", ';'), (V{"x=1", "y=2"}));
  const std::vector<std::string> items{"topk", "sidco-e", ""};
  EXPECT_EQ(gs::split_list(gs::join(items, ",")), (V{"topk", "sidco-e", ""}));
}

TEST(Base, StopwatchIsMonotonic) {
  gs::Stopwatch w;
  const double a = w.seconds();
  const double b = w.seconds();
  EXPECT_GE(a, 0.0);
  EXPECT_GE(b, a);
}

}  // namespace
