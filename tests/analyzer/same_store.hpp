#pragma once
// Two analysis stores hold the same results: the same options, source and rows in the same order,
// field for field (NaN equal to NaN), timings aside (they are measured, not computed).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "gs/analyzer/store.hpp"

namespace gs::analyzer::test {

inline double nan_as_value(double v) { return std::isnan(v) ? -1e308 : v; }

inline auto fields(const StepRow& r) { return std::make_tuple(r.step, r.row, r.loss, r.lr); }
inline auto fields(const VectorRow& r) { return std::make_tuple(r.step, r.scope, r.kind, r.n, r.zeros, r.nonfinite); }
inline auto fields(const FitRow& r) {
  return std::make_tuple(r.step, r.scope, r.kind, r.dist, nan_as_value(r.param1), nan_as_value(r.param2),
                         nan_as_value(r.loglik), nan_as_value(r.aic), nan_as_value(r.ks_D), nan_as_value(r.ks_p),
                         nan_as_value(r.ad_A2), r.ks_n, r.ks_subsampled, r.error);
}
inline auto fields(const TailRow& r) {
  return std::make_tuple(r.step, r.scope, r.dist, r.density, nan_as_value(r.threshold), nan_as_value(r.predicted),
                         r.observed);
}
inline auto fields(const QQRow& r) {
  return std::make_tuple(r.step, r.scope, r.dist, r.probability, nan_as_value(r.fitted), nan_as_value(r.sample));
}
inline auto fields(const ThresholdRow& r) {
  return std::make_tuple(r.step, r.scope, r.kind, r.method, r.density, nan_as_value(r.threshold), r.stages, r.selected,
                         nan_as_value(r.quality), nan_as_value(r.exact_threshold), nan_as_value(r.rel_error), r.error,
                         r.n, r.too_small);
}

template <class Row>
void expect_same_rows(const std::vector<Row>& a, const std::vector<Row>& b, const char* table) {
  ASSERT_EQ(a.size(), b.size()) << table;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(fields(a[i]) == fields(b[i])) << table << " row " << i << " differs";
}

inline void expect_same_store(const AnalysisReader& a, const AnalysisReader& b) {
  EXPECT_TRUE(a.options() == b.options()) << a.options().describe() << "\nvs\n" << b.options().describe();
  EXPECT_EQ(a.source().created, b.source().created);
  EXPECT_EQ(a.source().layers_hash, b.source().layers_hash);
  EXPECT_EQ(a.scope_width(), b.scope_width());
  expect_same_rows(a.steps(), b.steps(), "steps");
  expect_same_rows(a.vectors(), b.vectors(), "vectors");
  expect_same_rows(a.fits(), b.fits(), "fits");
  expect_same_rows(a.tails(), b.tails(), "tails");
  expect_same_rows(a.qq(), b.qq(), "qq");
  expect_same_rows(a.thresholds(), b.thresholds(), "thresholds");
}

}  // namespace gs::analyzer::test
