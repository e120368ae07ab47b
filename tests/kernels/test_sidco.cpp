// The light statistics passes and the SIDCo threshold-plus-compaction pipeline of the CPU backend
// against the naive oracle and fitting's sidco_threshold, on fresh random data. Tolerances:
// counts, min, max exact; sums as in test_passes.cpp (double sums in another order: relative
// max(1e-12, 1.2e-16 n)); SIDCo thresholds relative 1e-9 (the same stage math over sums taken in
// other blocks); selections exact at the threshold the pipeline reports.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "common/naive_passes.hpp"
#include "gs/fitting/thresholds.hpp"
#include "harness.hpp"

namespace gs::testing {
namespace {

namespace cpu = gs::kernels::cpu;

double rel(std::uint64_t n) { return std::max(1e-12, 1.2e-16 * double(n)); }

void expect_light_near(const fitting::MagnitudeStats& got, const fitting::MagnitudeStats& ref, bool squares) {
  EXPECT_EQ(got.count, ref.count);
  EXPECT_EQ(got.zeros, ref.zeros);
  EXPECT_EQ(got.nonfinite, ref.nonfinite);
  // The sum alone may be summed in float blocks (passes.hpp: relative error <= 8 * 2^-24).
  EXPECT_NEAR(got.sum, ref.sum, (squares ? rel(ref.count) : 8.0 * 0x1p-24) * ref.sum + 1e-300);
  if (squares)
    EXPECT_NEAR(got.sum_sq, ref.sum_sq, rel(ref.count) * ref.sum_sq + 1e-300);
  else
    EXPECT_TRUE(std::isnan(got.sum_sq));
  EXPECT_TRUE(std::isnan(got.sum_log));  // not asked for: NaN, so a misuse shows
  EXPECT_TRUE(std::isnan(got.sum_signed));
  if (ref.count) {
    EXPECT_EQ(got.min, ref.min);
    EXPECT_EQ(got.max, ref.max);
  }
}

TEST(LightStats, MatchOracleOnEveryShape) {
  std::uint64_t seed = 7100;
  for (Shape s : {Shape::laplace, Shape::pareto, Shape::ties, Shape::specials})
    for (std::size_t n : {std::size_t{1}, std::size_t{13}, std::size_t{4099}, std::size_t{200003}}) {
      const auto g = make_data(s, n, ++seed);
      SCOPED_TRACE(std::string(shape_name(s)) + " n=" + std::to_string(n));
      NaivePasses naive(g);
      cpu::CpuPasses passes(g);
      for (bool sq : {false, true}) {
        fitting::StatsFields f;
        f.sum_sq = sq;
        expect_light_near(passes.stats_light(f), naive.stats(), sq);
        // A tail stage: x above the median, shifted by the threshold itself (and by less).
        std::vector<double> mags;
        for (float v : g)
          if (std::isfinite(v)) mags.push_back(std::fabs(double(v)));
        if (mags.empty()) continue;
        std::nth_element(mags.begin(), mags.begin() + mags.size() / 2, mags.end());
        const double t = mags[mags.size() / 2];
        expect_light_near(passes.stats_above_light(t, t, f), naive.stats_above(t, t), sq);
        expect_light_near(passes.stats_above_light(t, 0.5 * t, f), naive.stats_above(t, 0.5 * t), sq);
      }
      // The full pass asked through the same entry: every field.
      const fitting::MagnitudeStats all = passes.stats_light(fitting::StatsFields::all());
      EXPECT_NEAR(all.sum_log, naive.stats().sum_log, 1e-7 * double(all.count) + 1e-9);
    }
}

TEST(LightStats, ShiftAboveThresholdKeepsTheContract) {
  // shift > threshold: y = |x - shift| may be 0 or fall with x; still add()'s semantics.
  const auto g = make_data(Shape::ties, 5000, 31);
  NaivePasses naive(g);
  const fitting::MagnitudeStats got = cpu::stats_above(g, 1.0, 2.5, fitting::StatsFields::all());
  const fitting::MagnitudeStats ref = naive.stats_above(1.0, 2.5);
  EXPECT_EQ(got.count, ref.count);
  EXPECT_EQ(got.zeros, ref.zeros);
  EXPECT_GT(ref.zeros, 0u);
  EXPECT_NEAR(got.sum, ref.sum, 1e-9 * ref.sum);
  EXPECT_EQ(got.min, ref.min);
  EXPECT_EQ(got.max, ref.max);
}

TEST(LightStats, FloatBlockSumCorrectsTheRoundedShift) {
  // Exceedances a hair above a shift that no float represents: y is tiny next to x, so summing
  // x - float(shift) without the count * (shift - float(shift)) correction would be off by about
  // 1e-4 of the sum, far outside the 8 * 2^-24 bound the float blocks keep.
  std::vector<float> g(4099);
  std::uint64_t state = 99;
  for (auto& v : g) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = 1.0f + float(state >> 40) * 0x1p-24f * 1e-3f;  // in [1, 1.001)
  }
  const double shift = 1.0 + 0.4 * 0x1p-23;  // between 1 and the next float
  NaivePasses naive(g);
  const fitting::MagnitudeStats ref = naive.stats_above(shift, shift);
  const fitting::MagnitudeStats got = cpu::stats_above(g, shift, shift, fitting::StatsFields{});
  ASSERT_GT(ref.count, 4000u);
  EXPECT_EQ(got.count, ref.count);
  EXPECT_NEAR(got.sum, ref.sum, 8.0 * 0x1p-24 * ref.sum);
}

TEST(LightStats, HugeValuesAndShiftsBeyondTheFloatRangeStayFinite) {
  // Values near FLT_MAX: 8-term float block sums would overflow; the pass must fall back to
  // double sums. A shift above FLT_MAX (nothing selected) must give a zero sum, not NaN.
  std::vector<float> g(4099, 3.0e38f);
  g[5] = -2.5e38f;
  g[17] = 0.0f;
  NaivePasses naive(g);
  cpu::CpuPasses passes(g);
  expect_light_near(passes.stats_light(fitting::StatsFields{}), naive.stats(), false);
  expect_light_near(passes.stats_above_light(1e38, 1e38, fitting::StatsFields{}), naive.stats_above(1e38, 1e38), false);
  const fitting::MagnitudeStats none = cpu::stats_above(g, 1e39, 1e39, fitting::StatsFields{});
  EXPECT_EQ(none.count, 0u);
  EXPECT_EQ(none.sum, 0.0);
}

std::vector<std::int64_t> reference_indices(std::span<const float> g, double t) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (std::isfinite(g[i]) && std::fabs(double(g[i])) > t) out.push_back(std::int64_t(i));
  return out;
}

TEST(SidcoSelect, EveryRouteMatchesFittingAndCompactExactly) {
  std::uint64_t seed = 8200;
  cpu::SidcoWorkspace ws;
  for (Shape shape : {Shape::laplace, Shape::specials, Shape::centre_taps})
    for (std::size_t n : {std::size_t{1000}, std::size_t{140001}, std::size_t{600001}}) {
      const auto g = make_data(shape, n, ++seed);
      NaivePasses naive(g);
      for (double delta : {0.1, 0.01, 0.001})
        for (int m : {1, 2, 3})
          for (auto variant : {fitting::SidcoVariant::exponential, fitting::SidcoVariant::pareto,
                               fitting::SidcoVariant::gamma_pareto}) {
            if (variant != fitting::SidcoVariant::exponential && m != 3) continue;
            SCOPED_TRACE(std::string(shape_name(shape)) + " n=" + std::to_string(n) +
                         " delta=" + std::to_string(delta) + " M=" + std::to_string(m) + " " +
                         std::string(fitting::method_name(variant)));
            const fitting::ThresholdResult ref =
                gs::fitting::sidco_threshold(naive, delta, variant, m, gs::fitting::SidcoRule::published());
            for (auto route : {cpu::SidcoRoute::full_passes, cpu::SidcoRoute::candidates, cpu::SidcoRoute::predicted,
                               cpu::SidcoRoute::automatic}) {
              std::vector<std::int32_t> idx(n, -1);
              std::vector<float> val(n, 0.0f);
              const auto r = cpu::sidco_select(g, delta, variant, m, gs::fitting::SidcoRule::published(),
                                               std::span(idx), std::span(val), route, &ws);
              EXPECT_EQ(r.stages, ref.stages);
              // SIDCo-E's stages sum in float blocks (passes.hpp): each stage's mean is within
              // 8 * 2^-24 of the oracle's, and the stages compound it; the others sum in double.
              const double tol = variant == fitting::SidcoVariant::exponential ? 4e-6 : 1e-9;
              EXPECT_NEAR(r.threshold, ref.threshold, tol * std::fabs(ref.threshold) + 1e-300);
              const auto want = reference_indices(g, r.threshold);
              ASSERT_EQ(r.selected, want.size());
              for (std::size_t i = 0; i < want.size(); ++i) {
                ASSERT_EQ(idx[i], want[i]) << "at " << i;
                ASSERT_EQ(val[i], g[std::size_t(want[i])]);
              }
              // Same selection as the oracle's count, up to ties at a threshold a rounding apart.
              EXPECT_NEAR(double(r.selected), double(ref.selected), 2.0 + 1e-6 * double(ref.selected));
              // (The routes' planning assumes stage 1 kept a quarter of g; on centre_taps it
              // keeps every non-zero value, a ninth: only the selections are compared there.)
              const bool tail = m > 1 && delta < 0.25 && r.stages > 1 && shape != Shape::centre_taps;
              if (route == cpu::SidcoRoute::candidates && tail) {
                EXPECT_EQ(r.route, cpu::SidcoRoute::candidates);
                EXPECT_EQ(r.full_reads, 2);
                EXPECT_GE(r.candidates, r.selected);
              }
              if (route == cpu::SidcoRoute::full_passes) {
                EXPECT_EQ(r.full_reads, r.stages + 1);
              }
              // The bound needs 1.5x stage 2's density below 1; automatic takes it when the
              // candidates (a quarter of that) stay within 10% of g. M = 3, and M = 2 at 0.01,
              // pack more than 1% of a chunk, so a thread's chunk after such a chunk takes the
              // branchless packing: at n = 600001 (10 chunks) on any thread count up to 5.
              const double d2 = 1.5 * std::pow(delta / 0.25, 1.0 / (m - 1));
              const bool bound = m > 1 && d2 < 1.0;
              const bool automatic_predicts = bound && 0.25 * d2 <= 0.10 * (1.0 + 1e-9);
              if ((route == cpu::SidcoRoute::predicted ||
                   (route == cpu::SidcoRoute::automatic && automatic_predicts)) &&
                  tail) {
                EXPECT_EQ(r.route, cpu::SidcoRoute::predicted);
                // Laplace data (|x| exponential) keeps every stage above the predicted bound:
                // two reads of g whatever M, with candidates about 1.5x stage 2's count.
                if (shape == Shape::laplace && n > 100000 && bound) {
                  const double stage2 = 0.25 * std::pow(delta / 0.25, 1.0 / (m - 1)) * double(n);
                  EXPECT_EQ(r.full_reads, 2);
                  EXPECT_GE(r.candidates, r.selected);
                  EXPECT_LT(double(r.candidates), 4.0 * stage2);
                }
              }
              // The Selection form returns the same.
              cpu::Selection<std::int32_t> sel;
              const auto r2 =
                  cpu::sidco_select(g, delta, variant, m, gs::fitting::SidcoRule::published(), sel, route, &ws);
              EXPECT_EQ(r2.threshold, r.threshold);
              ASSERT_EQ(sel.indices.size(), r.selected);
              EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), idx.begin()));
            }
          }
    }
  EXPECT_GT(ws.bytes(), 0u);
}

// With the count correction (the default rule), every route selects as one rule says: a
// selection inside the band stands (as published); one below it is made again at the threshold
// fitting's corrected sidco_threshold places (its secant step); one above it is cut, in memory, at
// the threshold fitting places there (the exponential step on the selection's mean excess) when
// that lands inside the band; otherwise (or landing above the band after the secant step) it keeps
// g's exact top-k. At most one more read of g than SIDCo as published.
TEST(SidcoSelect, TheCountCorrectionOnEveryRoute) {
  cpu::SidcoWorkspace ws;
  std::uint64_t seed = 9100;
  int below = 0, above = 0, stepped = 0;
  for (Shape shape : {Shape::laplace, Shape::normal, Shape::pareto, Shape::specials})
    for (std::size_t n : {std::size_t{140001}, std::size_t{600001}}) {
      const auto g = make_data(shape, n, ++seed);
      NaivePasses naive(g);
      for (double delta : {0.01, 0.001})
        for (int m : {1, 2, 3})
          for (auto variant : {fitting::SidcoVariant::exponential, fitting::SidcoVariant::gamma_pareto}) {
            SCOPED_TRACE(std::string(shape_name(shape)) + " n=" + std::to_string(n) +
                         " delta=" + std::to_string(delta) + " M=" + std::to_string(m) + " " +
                         std::string(fitting::method_name(variant)));
            const fitting::ThresholdResult ref = gs::fitting::sidco_threshold(naive, delta, variant, m);
            const std::uint64_t k = gs::fitting::target_count(n, delta);
            std::vector<std::int32_t> top(k);
            std::vector<float> top_val(k);
            cpu::topk(g, k, std::span(top), std::span(top_val));
            for (auto route : {cpu::SidcoRoute::full_passes, cpu::SidcoRoute::candidates, cpu::SidcoRoute::predicted,
                               cpu::SidcoRoute::automatic}) {
              cpu::Selection<std::int32_t> published_sel, sel;
              const auto published = cpu::sidco_select(g, delta, variant, m, gs::fitting::SidcoRule::published(),
                                                       published_sel, route, &ws);
              const auto r = cpu::sidco_select(g, delta, variant, m, gs::fitting::SidcoRule{}, sel, route, &ws);
              const double q = double(published.selected) / double(k);
              const bool inside = q >= 0.8 && q <= 1.25;
              EXPECT_EQ(r.corrected, !inside);
              EXPECT_LE(r.full_reads, published.full_reads + 1);
              if (inside) {
                EXPECT_EQ(sel.indices, published_sel.indices);
              } else if (sel.indices.size() == k && std::equal(top.begin(), top.end(), sel.indices.begin())) {
                above += q > 1.25;  // g's exact top-k
              } else if (q > 1.25) {
                ++stepped;  // the step up on the selection's own tail, inside the band
                EXPECT_TRUE(ref.corrected);
                EXPECT_NEAR(r.threshold, ref.threshold, 1e-9 * std::fabs(ref.threshold));
                const double qs = double(sel.indices.size()) / double(k);
                EXPECT_TRUE(qs >= 0.8 && qs <= 1.25) << qs;
                EXPECT_EQ(r.full_reads, published.full_reads) << "the step up reads no more of g";
                const auto want = reference_indices(g, r.threshold);
                EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), want.begin(), want.end()));
              } else {
                ++below;
                EXPECT_TRUE(ref.corrected);
                const double tol = variant == fitting::SidcoVariant::exponential ? 1e-5 : 1e-8;
                EXPECT_NEAR(r.threshold, ref.threshold, tol * std::fabs(ref.threshold) + 1e-300);
                const auto want = reference_indices(g, r.threshold);
                EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), want.begin(), want.end()));
              }
              // The span form selects the same.
              std::vector<std::int32_t> idx(n, -1);
              std::vector<float> val(n, 0.0f);
              const auto r2 = cpu::sidco_select(g, delta, variant, m, gs::fitting::SidcoRule{}, std::span(idx),
                                                std::span(val), route, &ws);
              ASSERT_EQ(r2.selected, sel.indices.size());
              EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), idx.begin()));
            }
          }
    }
  EXPECT_GE(below, 3) << "the data should put some selections below the band";
  EXPECT_GE(above + stepped, 3) << "the data should put some selections above the band";
  EXPECT_GE(stepped, 1) << "some should be cut inside the band by the step up, without an exact top-k";
}

// The carried scale (SidcoRule::scale, the DDP hook's calibration) below 1 puts the final
// threshold under the bound the automatic route packs candidates above: the bound moves down with
// it, so the selection still comes from the candidates (two reads of g at M = 2), the same one
// every route makes at that threshold.
TEST(SidcoSelect, ACarriedScaleBelowOneStillSelectsFromTheCandidates) {
  cpu::SidcoWorkspace ws;
  const auto g = make_data(Shape::laplace, 600001, 9300);
  for (const double scale : {0.95, 0.85, 0.75}) {
    SCOPED_TRACE(scale);
    fitting::SidcoRule rule = fitting::SidcoRule::published();
    rule.scale = scale;
    cpu::Selection<std::int32_t> sel, full;
    const auto r =
        cpu::sidco_select(g, 0.01, fitting::SidcoVariant::exponential, 2, rule, sel, cpu::SidcoRoute::automatic, &ws);
    const auto f = cpu::sidco_select(g, 0.01, fitting::SidcoVariant::exponential, 2, rule, full,
                                     cpu::SidcoRoute::full_passes, &ws);
    EXPECT_EQ(r.threshold, f.threshold);
    EXPECT_EQ(r.full_reads, 2) << "stage 1, then stage 2 packing the candidates; no compaction of g";
    EXPECT_EQ(f.full_reads, 3);
    EXPECT_EQ(sel.indices, full.indices);
    const auto want = reference_indices(g, r.threshold);
    EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), want.begin(), want.end()));
  }
}

// Statistics taken as a vector is written (cpu::stats_as_written, what the DDP hook's pass that
// writes the accumulator does): stats() of the written vector to the bit, for every field set,
// over several chunks, with zeros, NaN and Inf among the values.
TEST(StatsAsWritten, AreTheStatsOfTheWrittenVectorToTheBit) {
  const std::size_t n = 3 * cpu::kChunk + 17;
  const auto src = make_data(Shape::specials, n, 9501);
  for (const auto& fields :
       {fitting::StatsFields{}, fitting::sidco_first_fields(fitting::SidcoVariant::pareto),
        fitting::sidco_first_fields(fitting::SidcoVariant::gamma_pareto), fitting::StatsFields::all()}) {
    std::vector<float> out(n, -1.0f);
    std::vector<int> filled((n + cpu::kChunk - 1) / cpu::kChunk, 0);
    const auto got = cpu::stats_as_written(out, fields, [&](std::size_t b, std::size_t e) {
      ++filled[b / cpu::kChunk];
      for (std::size_t i = b; i < e; ++i) out[i] = 0.5f * src[i];
    });
    for (int f : filled) EXPECT_EQ(f, 1) << "each chunk written once";
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(0.5f * src[i]));
    const auto want = cpu::stats(out, fields);
    EXPECT_EQ(got.count, want.count);
    EXPECT_EQ(got.zeros, want.zeros);
    EXPECT_EQ(got.nonfinite, want.nonfinite);
    EXPECT_GT(want.nonfinite, 0u);
    for (auto field :
         {&fitting::MagnitudeStats::sum, &fitting::MagnitudeStats::sum_sq, &fitting::MagnitudeStats::sum_log,
          &fitting::MagnitudeStats::sum_signed, &fitting::MagnitudeStats::min, &fitting::MagnitudeStats::max})
      EXPECT_EQ(std::bit_cast<std::uint64_t>(got.*field), std::bit_cast<std::uint64_t>(want.*field));
  }
}

// SIDCo given stage 1's statistics (the hook's accumulator pass took them): the same threshold and
// selection as the call that reads them, one read of g fewer, for every variant and stage count,
// on a vector below the sampled route's size and on one above it (where the call that reads them
// samples and packs in stage 1's read).
TEST(SidcoSelect, GivenFirstStatisticsSelectTheSameWithOneReadFewer) {
  cpu::SidcoWorkspace ws;
  for (const std::size_t n : {std::size_t{300001}, (std::size_t{1} << 20) + 77}) {
    const auto g = make_data(Shape::laplace, n, 9600 + n % 97);
    for (const auto variant :
         {fitting::SidcoVariant::exponential, fitting::SidcoVariant::pareto, fitting::SidcoVariant::gamma_pareto})
      for (const int stages : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", variant " << int(variant) << ", stages " << stages);
        const auto first = cpu::stats(g, fitting::sidco_first_fields(variant));
        fitting::SidcoRule rule;
        rule.scale = 0.9;
        cpu::Selection<std::int32_t> read, given;
        const auto r = cpu::sidco_select(g, 0.01, variant, stages, rule, read, cpu::SidcoRoute::automatic, &ws);
        const auto s =
            cpu::sidco_select(g, 0.01, variant, stages, rule, given, cpu::SidcoRoute::automatic, &ws, &first);
        EXPECT_EQ(s.threshold, r.threshold);
        EXPECT_EQ(s.estimate, r.estimate);
        EXPECT_EQ(s.stages, r.stages);
        EXPECT_EQ(s.corrected, r.corrected);
        EXPECT_EQ(given.indices, read.indices);
        EXPECT_EQ(given.values, read.values);
        if (r.route == cpu::SidcoRoute::predicted && stages == 1)
          EXPECT_EQ(s.full_reads, 1) << "no sample, no packing: the compaction alone";
        else
          EXPECT_EQ(s.full_reads, r.full_reads - 1);
      }
  }
  // Statistics of another vector are refused, by their count.
  const auto g = make_data(Shape::laplace, 5000, 9700);
  const auto other = cpu::stats(std::span(g).first(4999), fitting::StatsFields{});
  cpu::Selection<std::int32_t> sel;
  EXPECT_THROW(cpu::sidco_select(g, 0.01, fitting::SidcoVariant::exponential, 1, {}, sel, cpu::SidcoRoute::automatic,
                                 nullptr, &other),
               gs::Error);
}

// One stage on a vector of 1 Mi elements or more (here 2 Mi): the predicted route predicts stage 1 from a
// sample of 4096 cache lines and packs in stage 1's read; the selection comes from the
// candidates when stage 1's threshold is at or above the prediction, else from a second read.
TEST(SidcoSelect, SampledFirstStageReadsOnceOrFallsBack) {
  const std::size_t n = (std::size_t{1} << 21) + 13;
  // This n has 131072 lines of 16 floats; the sample takes every 32nd line, the first 16 of each
  // 512 elements. "skewed" makes exactly those 4x larger: the sample's mean then overstates g's
  // (about 3.7x), and at low densities the prediction lies above stage 1's threshold, so the
  // selection rereads g.
  auto skewed = make_data(Shape::laplace, n, 9101);
  for (std::size_t i = 0; i < n; ++i)
    if (i % 512 < 16) skewed[i] *= 4.0f;
  struct Case {
    const char* name;
    std::vector<float> g;
    bool fallback;
  };
  std::vector<Case> cases;
  cases.push_back({"laplace", make_data(Shape::laplace, n, 9100), false});
  cases.push_back({"specials", make_data(Shape::specials, n, 9102), false});
  cases.push_back({"skewed", std::move(skewed), true});
  cpu::SidcoWorkspace ws;
  for (const auto& c : cases) {
    NaivePasses naive(c.g);
    // (delta, M): M = 3 at 0.3 is one stage too (delta above the first stage's 0.25).
    for (auto [delta, m] : {std::pair{0.01, 1}, std::pair{0.001, 1}, std::pair{0.3, 3}})
      for (auto route : {cpu::SidcoRoute::predicted, cpu::SidcoRoute::automatic, cpu::SidcoRoute::full_passes}) {
        SCOPED_TRACE(std::string(c.name) + " delta=" + std::to_string(delta) + " M=" + std::to_string(m) +
                     " route=" + std::to_string(int(route)));
        const fitting::ThresholdResult ref = gs::fitting::sidco_threshold(
            naive, delta, fitting::SidcoVariant::exponential, m, gs::fitting::SidcoRule::published());
        std::vector<std::int32_t> idx(n, -1);
        std::vector<float> val(n, 0.0f);
        const auto r =
            cpu::sidco_select(c.g, delta, fitting::SidcoVariant::exponential, m, gs::fitting::SidcoRule::published(),
                              std::span(idx), std::span(val), route, &ws);
        EXPECT_EQ(r.stages, 1);
        EXPECT_NEAR(r.threshold, ref.threshold, 4e-6 * ref.threshold);
        const auto want = reference_indices(c.g, r.threshold);
        ASSERT_EQ(r.selected, want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(idx[i], want[i]) << "at " << i;
          ASSERT_EQ(val[i], c.g[std::size_t(want[i])]);
        }
        if (std::string(c.name) == "specials") {
          EXPECT_GT(r.nonfinite, 0u);
        }
        // automatic takes the sampled route while its candidates (3x delta) stay within 10% of g.
        const bool sampled =
            route == cpu::SidcoRoute::predicted || (route == cpu::SidcoRoute::automatic && 3.0 * delta <= 0.10);
        if (!sampled) {
          EXPECT_EQ(r.route, cpu::SidcoRoute::full_passes);
          EXPECT_EQ(r.full_reads, 2);
          continue;
        }
        EXPECT_EQ(r.route, cpu::SidcoRoute::predicted);
        // A 3.7x mean puts the prediction above stage 1 at 0.01 and 0.001 (the prediction at 3x
        // delta stays below while the sample's mean is within ln(1/delta) / ln(1/(3 delta)) of
        // g's: 1.3x, 1.2x), not at 0.3 (11x).
        const bool falls_back = c.fallback && delta < 0.1;
        EXPECT_EQ(r.full_reads, falls_back ? 2 : 1);
        if (!falls_back) {
          EXPECT_GE(r.candidates, r.selected);
          EXPECT_LT(double(r.candidates), 4.0 * delta * double(n));
        }
        // The Selection form returns the same.
        cpu::Selection<std::int32_t> sel;
        const auto r2 = cpu::sidco_select(c.g, delta, fitting::SidcoVariant::exponential, m,
                                          gs::fitting::SidcoRule::published(), sel, route, &ws);
        EXPECT_EQ(r2.threshold, r.threshold);
        ASSERT_EQ(sel.indices.size(), r.selected);
        EXPECT_TRUE(std::equal(sel.indices.begin(), sel.indices.end(), idx.begin()));
      }
  }
}

TEST(SidcoSelect, RecountAndEstimateAgreeWithFitting) {
  const auto g = make_data(Shape::laplace, 200000, 77);
  NaivePasses naive(g);
  cpu::CpuPasses passes(g);
  for (bool recount : {false, true}) {
    const auto ref = gs::fitting::sidco_threshold(naive, 0.001, fitting::SidcoVariant::exponential, 4,
                                                  gs::fitting::SidcoRule{recount, false});
    const auto est = gs::fitting::sidco_estimate(passes, 0.001, fitting::SidcoVariant::exponential, 4, recount);
    EXPECT_NEAR(est.threshold, ref.threshold, 1e-9 * ref.threshold);
    EXPECT_EQ(est.stages, ref.stages);
    EXPECT_EQ(est.selected, 0u);  // the estimate does not count
    cpu::Selection<std::int32_t> sel;
    const auto r =
        cpu::sidco_select(g, 0.001, fitting::SidcoVariant::exponential, 4, gs::fitting::SidcoRule{recount, false}, sel);
    EXPECT_NEAR(r.threshold, ref.threshold, 1e-9 * ref.threshold);
  }
}

TEST(SidcoSelect, BadArgumentsThrowBeforeWriting) {
  const auto g = make_data(Shape::laplace, 50000, 5);
  std::vector<std::int32_t> idx(10, -7);
  std::vector<float> val(10, 3.0f);
  for (auto route : {cpu::SidcoRoute::full_passes, cpu::SidcoRoute::candidates, cpu::SidcoRoute::predicted}) {
    EXPECT_THROW(cpu::sidco_select(g, 0.01, fitting::SidcoVariant::exponential, 2, gs::fitting::SidcoRule::published(),
                                   std::span(idx), std::span(val), route),
                 gs::Error);  // ~500 selected, room for 10
    EXPECT_TRUE(std::all_of(idx.begin(), idx.end(), [](auto v) { return v == -7; }));
  }
  cpu::Selection<std::int32_t> sel;
  EXPECT_THROW(
      cpu::sidco_select(g, 0.0, fitting::SidcoVariant::exponential, 2, gs::fitting::SidcoRule::published(), sel),
      gs::Error);
  EXPECT_THROW(
      cpu::sidco_select(g, 1.5, fitting::SidcoVariant::exponential, 2, gs::fitting::SidcoRule::published(), sel),
      gs::Error);
  EXPECT_THROW(
      cpu::sidco_select(g, 0.01, fitting::SidcoVariant::exponential, 0, gs::fitting::SidcoRule::published(), sel),
      gs::Error);
  EXPECT_THROW(cpu::sidco_select(std::span<const float>(), 0.01, fitting::SidcoVariant::exponential, 2,
                                 gs::fitting::SidcoRule::published(), sel),
               gs::Error);
}

}  // namespace
}  // namespace gs::testing
