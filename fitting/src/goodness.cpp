// Goodness of fit: likelihoods, Kolmogorov-Smirnov (statistic and the distribution of D_n),
// Anderson-Darling, tail checks, QQ points.
#include "gs/fitting/goodness.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <numbers>

#include "gs/base/error.hpp"
#include "gs/fitting/thresholds.hpp"

namespace gs::fitting {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = std::numbers::pi;

void check_sorted(std::span<const double> x, const char* fn) {
  if (x.empty()) throw Error(std::string(fn) + ": the sample is empty");
  if (!std::is_sorted(x.begin(), x.end())) throw Error(std::string(fn) + ": the sample must be sorted ascending");
}

// ---- Durbin matrix, Marsaglia-Tsang-Wang evaluation: P(D_n < d) ------------------------------
// A matrix with a separate binary exponent, so that H^n neither overflows nor underflows.
struct ScaledMatrix {
  int m = 0;
  std::vector<double> a;  // row-major m x m
  long exponent = 0;      // value = a * 2^exponent
};

ScaledMatrix multiply(const ScaledMatrix& x, const ScaledMatrix& y) {
  const int m = x.m;
  ScaledMatrix r{m, std::vector<double>(std::size_t(m) * m, 0.0), x.exponent + y.exponent};
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < m; ++l) {
      const double xil = x.a[std::size_t(i) * m + l];
      if (xil == 0.0) continue;
      const double* yl = &y.a[std::size_t(l) * m];
      double* ri = &r.a[std::size_t(i) * m];
      for (int j = 0; j < m; ++j) ri[j] += xil * yl[j];
    }
  double big = 0.0;
  for (double v : r.a) big = std::max(big, std::fabs(v));
  if (big > 0.0) {
    int e = 0;
    std::frexp(big, &e);
    for (double& v : r.a) v = std::ldexp(v, -e);
    r.exponent += e;
  }
  return r;
}

double durbin_cdf(std::uint64_t n, double d) {
  const double nd = double(n) * d;
  const int k = int(std::ceil(nd));
  const double h = double(k) - nd;
  const int m = 2 * k - 1;
  ScaledMatrix hm{m, std::vector<double>(std::size_t(m) * m, 0.0), 0};
  auto at = [&](int i, int j) -> double& { return hm.a[std::size_t(i) * m + j]; };
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j)
      if (i - j + 1 >= 0) at(i, j) = 1.0;
  for (int i = 0; i < m; ++i) {
    at(i, 0) -= std::pow(h, i + 1);
    at(m - 1, i) -= std::pow(h, m - i);
  }
  if (2.0 * h - 1.0 > 0.0) at(m - 1, 0) += std::pow(2.0 * h - 1.0, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j)
      if (i - j + 1 > 0) at(i, j) /= std::tgamma(double(i - j + 2));
  // Binary powering of H.
  ScaledMatrix result{m, std::vector<double>(std::size_t(m) * m, 0.0), 0};
  for (int i = 0; i < m; ++i) result.a[std::size_t(i) * m + i] = 1.0;
  ScaledMatrix base = hm;
  for (std::uint64_t e = n; e > 0; e >>= 1) {
    if (e & 1) result = multiply(result, base);
    if (e > 1) base = multiply(base, base);
  }
  const double entry = result.a[std::size_t(k - 1) * m + (k - 1)];
  if (!(entry > 0.0)) return 0.0;
  const double logp = std::log(entry) + double(result.exponent) * std::numbers::ln2 + std::lgamma(double(n) + 1.0) -
                      double(n) * std::log(double(n));
  return std::clamp(std::exp(logp), 0.0, 1.0);
}

// Pelz-Good: P(D_n <= x) ~ K0(z) + K1(z)/sqrt(n) + K2(z)/n + K3(z)/n^1.5, z = x sqrt(n), each K
// in its Jacobi-theta form (fast convergence for the z of interest).
double pelz_good_cdf(std::uint64_t n, double x) {
  const double z = std::sqrt(double(n)) * x;
  const double z2 = z * z, z4 = z2 * z2, z6 = z4 * z2, z8 = z4 * z4;
  const double pi2 = kPi * kPi, pi4 = pi2 * pi2, pi6 = pi4 * pi2;
  if (-pi2 / (8.0 * z2) < -708.0) return 0.0;
  const int kmax = std::max(1, int(std::ceil(16.0 * z / kPi)));
  double k0 = 0, k1 = 0, k2 = 0, k3 = 0;
  for (int k = 1; k <= kmax; ++k) {
    const double mm = double(2 * k - 1), m2 = mm * mm, m4 = m2 * m2, m6 = m4 * m2;
    const double w = std::exp(-m2 * pi2 / (8.0 * z2));
    k0 += w;
    k1 += w * (-z2 + pi2 * m2 / 4.0);
    k2 += w * (6.0 * z6 + 2.0 * z4 + (2.0 * z4 - 5.0 * z2) * pi2 * m2 / 4.0 + pi4 * (1.0 - 2.0 * z2) * m4 / 16.0);
    k3 += w * (-30.0 * z6 - 90.0 * z8 + pi2 * (135.0 * z4 - 96.0 * z6) * m2 / 4.0 +
               pi4 * (-60.0 * z2 + 212.0 * z4) * m4 / 16.0 + pi6 * (5.0 - 30.0 * z2) * m6 / 64.0);
  }
  const double root2pi = std::sqrt(2.0 * kPi);
  k0 *= root2pi / z;
  k1 *= root2pi / (6.0 * z4);
  k2 *= root2pi / (72.0 * z6 * z);
  k3 *= root2pi / (6480.0 * z8 * z2);
  double e2 = 0, e3 = 0;
  for (int k = 1; k <= kmax; ++k) {
    const double kk = double(k) * k;
    const double w = std::exp(-kk * pi2 / (2.0 * z2));
    e2 += kk * w;
    e3 += (3.0 * z2 - pi2 * kk) * kk * w;
  }
  k2 += e2 * pi2 * root2pi / (-36.0 * z2 * z);
  k3 += e3 * pi2 * root2pi / (216.0 * z6);
  const double rn = std::sqrt(double(n));
  return k0 + k1 / rn + k2 / double(n) + k3 / (double(n) * rn);
}

}  // namespace

// ---- likelihoods -------------------------------------------------------------------------------
double loglik(const Exponential& d, const MagnitudeStats& s) {
  return -double(s.count) * std::log(d.beta()) - s.sum / d.beta();
}
double loglik(const Gamma& d, const MagnitudeStats& s) {
  const double a = d.alpha(), b = d.beta(), n = double(s.count);
  return (a - 1.0) * s.sum_log - s.sum / b - n * std::lgamma(a) - n * a * std::log(b);
}
double loglik(const Normal& d, const MagnitudeStats& s) {
  const double n = double(s.count), mu = d.mu(), sg = d.sigma();
  const double ss = s.sum_sq - 2.0 * mu * s.sum + n * mu * mu;  // sum (x - mu)^2
  return -n * (std::log(sg) + 0.5 * std::log(2.0 * kPi)) - 0.5 * ss / (sg * sg);
}
double loglik(const GeneralizedPareto& d, MagnitudePasses& passes, double threshold, double shift) {
  const double xi = d.xi(), sigma = d.sigma();
  if (xi < 0.0) {
    const MagnitudeStats y = passes.stats_above(threshold, shift);
    if (y.count > 0 && y.max >= d.upper()) return -kInf;
  }
  if (xi == 0.0) {
    const MagnitudeStats y = passes.stats_above(threshold, shift);
    return -double(y.count) * std::log(sigma) - y.sum / sigma;
  }
  const GpSums g = passes.gp_sums(xi / sigma, threshold, shift);
  const double l = -double(g.count) * std::log(sigma) - (1.0 + 1.0 / xi) * g.sum_log1p;
  return std::isnan(l) ? -kInf : l;
}
double loglik(const Sid& d, MagnitudePasses& passes, const MagnitudeStats& s) {
  if (const auto* gp = std::get_if<GeneralizedPareto>(&d)) return loglik(*gp, passes);
  return std::visit(
      [&](const auto& v) -> double {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, GeneralizedPareto>)
          return 0.0;  // handled above
        else
          return loglik(v, s);
      },
      d);
}
double aic(double ll, int parameters) { return 2.0 * parameters - 2.0 * ll; }

// ---- Kolmogorov-Smirnov ------------------------------------------------------------------------
double ks_statistic(const Sid& d, std::span<const double> sorted) {
  check_sorted(sorted, "ks_statistic");
  return edf_statistics(d, sorted).ks_D;
}

double kolmogorov_cdf(double x) {
  if (!(x > 0.0)) return 0.0;
  if (x >= 1.0) return 1.0 - kolmogorov_sf(x);
  const double pi2 = kPi * kPi;
  double s = 0.0;
  for (int k = 1; k <= 20; ++k) {
    const double m = 2.0 * k - 1.0;
    const double t = std::exp(-m * m * pi2 / (8.0 * x * x));
    s += t;
    if (t < 1e-17 * s) break;
  }
  return std::sqrt(2.0 * kPi) / x * s;
}

double kolmogorov_sf(double x) {
  if (!(x > 0.0)) return 1.0;
  if (x < 1.0) return 1.0 - kolmogorov_cdf(x);
  double s = 0.0;
  for (int k = 1; k <= 100; ++k) {
    const double t = std::exp(-2.0 * k * k * x * x);
    s += (k % 2 ? t : -t);
    if (t < 1e-17 * std::fabs(s)) break;
  }
  return std::clamp(2.0 * s, 0.0, 1.0);
}

double smirnov_sf(std::uint64_t n, double d) {
  if (n == 0) throw Error("smirnov_sf: n must be at least 1");
  if (!(d > 0.0)) return 1.0;
  if (d >= 1.0) return 0.0;
  const double nn = double(n);
  const auto jmax = static_cast<std::uint64_t>(std::floor(nn * (1.0 - d)));
  const double lgn = std::lgamma(nn + 1.0);
  std::vector<double> logs;
  logs.reserve(std::size_t(jmax) + 1);
  double top = -kInf;
  // ln C(n, j) by the recurrence ln C(n, j) = ln C(n, j-1) + ln((n-j+1)/j), restarted from lgamma
  // every 256 terms so that its rounding cannot build up (a million terms for a 1M-point sample:
  // two lgamma calls per term cost more than the rest of the test).
  double log_choose = 0.0;
  for (std::uint64_t j = 0; j <= jmax; ++j) {
    const double jj = double(j);
    log_choose = j % 256 == 0 ? lgn - std::lgamma(jj + 1.0) - std::lgamma(nn - jj + 1.0)
                              : log_choose + std::log((nn - jj + 1.0) / jj);
    const double a = 1.0 - d - jj / nn, b = d + jj / nn;
    if (!(a > 0.0) && nn - jj > 0.0) continue;  // (0)^(n-j) term vanishes
    const double l = log_choose + (nn - jj) * std::log(a) + (jj - 1.0) * std::log(b);
    logs.push_back(l);
    top = std::max(top, l);
  }
  double s = 0.0;
  for (double l : logs) s += std::exp(l - top);
  return std::clamp(d * s * std::exp(top), 0.0, 1.0);
}

double ks_pvalue(double d, std::uint64_t n) {
  if (n == 0) throw Error("ks_pvalue: n must be at least 1");
  if (std::isnan(d)) throw Error("ks_pvalue: D is NaN");
  if (d >= 1.0) return 0.0;
  const double nn = double(n), t = nn * d;
  if (t <= 0.5) return 1.0;
  if (t <= 1.0) {  // Ruben-Gambino: P(D_n <= d) = n!/n^n (2t - 1)^n
    const double logcdf = std::lgamma(nn + 1.0) - nn * std::log(nn) + nn * std::log(2.0 * t - 1.0);
    return std::clamp(-std::expm1(logcdf), 0.0, 1.0);
  }
  if (t >= nn - 1.0) return std::clamp(2.0 * std::pow(1.0 - d, nn), 0.0, 1.0);
  const double nd2 = t * d;
  // Massart's bound P(D_n > d) <= 2 exp(-2 n d^2): beyond 2 n d^2 = 746 the p-value is below half
  // the smallest subnormal double, so it is 0 exactly as a double, without summing n terms.
  if (2.0 * nd2 > 746.0) return 0.0;
  if (d >= 0.5 || nd2 >= (n <= 140 ? 4.0 : 2.2)) return std::min(1.0, 2.0 * smirnov_sf(n, d));
  if (n <= 140 || (n <= 100000 && nn * std::pow(d, 1.5) <= 1.4)) return std::clamp(1.0 - durbin_cdf(n, d), 0.0, 1.0);
  return std::clamp(1.0 - pelz_good_cdf(n, d), 0.0, 1.0);
}

// ---- Anderson-Darling --------------------------------------------------------------------------
double ad_statistic(const Sid& d, std::span<const double> sorted) {
  check_sorted(sorted, "ad_statistic");
  return edf_statistics(d, sorted).ad_A2;
}

// ---- both from one pass ------------------------------------------------------------------------
namespace {

// Points per chunk: fixed, so the chunk sums (and their order) never depend on the thread count.
constexpr std::size_t kEdfChunk = 1 << 16;
// Below this many points the loop runs on the calling thread (starting threads costs more).
constexpr std::size_t kEdfParallelMin = 1 << 17;

// ---- the law between sorted points: quintic Hermite segments ----------------------------------
// A positive double's bits order like its value, so the bits above kSegmentShift cut the positive
// axis into segments, 2^(52 - kSegmentShift) = 128 per binary octave (each 1/128 to 1/256 of its
// values wide). Where a segment holds at least kMinRun consecutive sorted points, F, ln F and
// ln S are interpolated there from the law's values, slopes and curvatures at the segment's two
// ends (quintic Hermite: error w^6 max|y^(6)| / 46080 for width w; for ln F ~ a ln x near 0,
// 120 a 2^-42 / 46080, below 1e-15), and the three interpolants are checked against the law at
// the segment's middle, where that error peaks: the segment is used only if all three agree
// within kSegmentTolerance (absolute for F, relative to max(1, |y|) for the logs). Elsewhere (few
// points, a law too steep for the segment, an end outside the support, x <= 0) each point is
// evaluated exactly. On a 1M-point layer some thousands of evaluations of the law replace a
// million (the gamma law's incomplete gamma function dominated the analysis).
constexpr int kSegmentShift = 45;
constexpr std::size_t kMinRun = 8;
constexpr double kSegmentTolerance = 1e-13;

std::uint64_t segment_of(double x) { return std::bit_cast<std::uint64_t>(x) >> kSegmentShift; }
double segment_start(std::uint64_t s) { return std::bit_cast<double>(s << kSegmentShift); }

// d/dx ln f(x) for x > 0 in the support: what turns slopes into curvatures below.
double score(const Exponential& d, double) { return -1.0 / d.beta(); }
double score(const Gamma& d, double x) { return (d.alpha() - 1.0) / x - 1.0 / d.beta(); }
double score(const GeneralizedPareto& d, double x) { return -(1.0 + d.xi()) / (d.sigma() + d.xi() * x); }
double score(const Normal& d, double x) { return -(x - d.mu()) / (d.sigma() * d.sigma()); }

// y, y' and y'' of F, ln F and ln S at one end of a segment. With f = F', s = (ln f)':
// F'' = f s; (ln F)' = f/F, (ln F)'' = (ln F)' (s - (ln F)'); (ln S)' = -f/S, likewise.
struct Knot {
  std::array<double, 3> cdf{}, log_cdf{}, log_sf{};
  bool usable = false;
};

template <class Law>
Knot knot(const Law& law, double x) {
  const CdfPoint p = cdf_point(law, x);
  const double f = std::exp(logpdf(law, x)), s = score(law, x);
  const double lf1 = f / p.cdf, ls1 = -f / std::exp(p.log_sf);
  Knot k;
  k.cdf = {p.cdf, f, f * s};
  k.log_cdf = {p.log_cdf, lf1, lf1 * (s - lf1)};
  k.log_sf = {p.log_sf, ls1, ls1 * (s - ls1)};
  k.usable = std::isfinite(x) && p.cdf > 0.0 && std::isfinite(p.log_sf);
  for (const auto* y : {&k.cdf, &k.log_cdf, &k.log_sf})
    for (double v : *y) k.usable = k.usable && std::isfinite(v);
  return k;
}

// The three quintics on one segment, in powers of t = (x - start) / width (Horner's rule per
// point). From the Hermite form with Δ = y1 - y0, d = w y', c = w^2 y'' at t = 0 and 1:
// y0 + d0 t + c0/2 t^2 + (10Δ - 6d0 - 4d1 - 3c0/2 + c1/2) t^3 + (-15Δ + 8d0 + 7d1 + 3c0/2 - c1) t^4
// + (6Δ - 3d0 - 3d1 - c0/2 + c1/2) t^5; differences keep the coefficients free of cancellation.
struct Segment {
  double start = 0.0, inv_width = 0.0;  // a segment's width is a power of 2: 1/w is exact
  Knot hi;                              // the next segment's start, when it is used next
  std::array<std::array<double, 6>, 3> k{};

  void set(double lo_x, double hi_x, const Knot& lo, const Knot& high) {
    start = lo_x;
    const double w = hi_x - lo_x, w2 = w * w;
    inv_width = 1.0 / w;
    hi = high;
    const std::array<const std::array<double, 3>*, 3> y0 = {&lo.cdf, &lo.log_cdf, &lo.log_sf};
    const std::array<const std::array<double, 3>*, 3> y1 = {&hi.cdf, &hi.log_cdf, &hi.log_sf};
    for (std::size_t f = 0; f < 3; ++f) {
      const auto& a = *y0[f];
      const auto& b = *y1[f];
      const double delta = b[0] - a[0], d0 = w * a[1], d1 = w * b[1], c0 = w2 * a[2], c1 = w2 * b[2];
      k[f] = {a[0],
              d0,
              0.5 * c0,
              10.0 * delta - 6.0 * d0 - 4.0 * d1 - 1.5 * c0 + 0.5 * c1,
              -15.0 * delta + 8.0 * d0 + 7.0 * d1 + 1.5 * c0 - c1,
              6.0 * delta - 3.0 * d0 - 3.0 * d1 - 0.5 * c0 + 0.5 * c1};
    }
  }
  CdfPoint at(double x) const {
    const double t = (x - start) * inv_width;
    auto horner = [t](const std::array<double, 6>& c) {
      return ((((c[5] * t + c[4]) * t + c[3]) * t + c[2]) * t + c[1]) * t + c[0];
    };
    return {horner(k[0]), horner(k[1]), horner(k[2])};
  }
};

bool agrees(const CdfPoint& a, const CdfPoint& b) {
  auto close = [](double x, double y, double scale) { return std::fabs(x - y) <= kSegmentTolerance * scale; };
  return close(a.cdf, b.cdf, 1.0) && close(a.log_cdf, b.log_cdf, std::max(1.0, std::fabs(b.log_cdf))) &&
         close(a.log_sf, b.log_sf, std::max(1.0, std::fabs(b.log_sf)));
}

struct EdfChunk {
  std::uint64_t interpolated = 0;
  double dmax = 0.0;
  long double ad_sum = 0.0L;  // long double: m terms of size up to 2m |ln F|, then A^2 = -m - s/m
};

// A^2 = -m - (1/m) sum_i (2i+1) [ln F(x_i) + ln S(x_{m-1-i})] (0-based) regrouped by point:
// x_j enters with weight 2j+1 through ln F and 2(m-j)-1 through ln S.
struct EdfAccumulator {
  double m = 0.0;
  EdfChunk c;
  void add(std::size_t j, const CdfPoint& p) {
    const double above = double(j + 1) / m - p.cdf, below = p.cdf - double(j) / m;
    c.dmax = std::max(c.dmax, std::max(above, below));
    const double wf = 2.0 * double(j) + 1.0, ws = 2.0 * (m - double(j)) - 1.0;
    c.ad_sum += static_cast<long double>(wf * p.log_cdf + ws * p.log_sf);
  }
};

template <class Law>
EdfChunk edf_chunk(const Law& law, std::span<const double> x, std::size_t begin, std::size_t end, EdfEvaluation how) {
  EdfAccumulator acc{double(x.size()), {}};
  auto exactly = [&](std::size_t from, std::size_t to) {
    CdfPoint p;
    for (std::size_t j = from; j < to; ++j) {
      // Float data repeat values (a quarter of a 25M-value gradient): reuse the law's value.
      if (j == from || x[j] != x[j - 1]) p = cdf_point(law, x[j]);
      acc.add(j, p);
    }
  };
  if (how == EdfEvaluation::exact) {
    exactly(begin, end);
    return acc.c;
  }
  Segment seg;
  std::uint64_t held = 0;  // the segment whose knots seg holds (0: none; 0 and 1 are never used)
  bool held_ok = false;
  for (std::size_t j = begin; j < end;) {
    if (!(x[j] > 0.0)) {  // the bits of x <= 0 do not order like the values
      exactly(j, j + 1);
      ++j;
      continue;
    }
    const std::uint64_t s = segment_of(x[j]);
    std::size_t r = j + 1;
    while (r < end && segment_of(x[r]) == s) ++r;
    const double lo = segment_start(s), hi = segment_start(s + 1);
    // Segments of normal doubles whose end is finite: the top octave's last segment ends at +inf,
    // and below 2^-1016 (subnormals included) 1/width overflows.
    const bool finite_segment = std::isfinite(hi) && std::isfinite(1.0 / (hi - lo)) && s > 1;
    if (r - j >= kMinRun && finite_segment && held != s) {
      // The previous segment's end is this one's start.
      const Knot start = held == s - 1 ? seg.hi : knot(law, lo);
      seg.set(lo, hi, start, knot(law, hi));
      held = s;
      const double mid = lo + 0.5 * (hi - lo);
      held_ok = start.usable && seg.hi.usable && agrees(seg.at(mid), cdf_point(law, mid));
    }
    if (r - j >= kMinRun && held == s && held_ok) {
      for (std::size_t i = j; i < r; ++i) acc.add(i, seg.at(x[i]));
      acc.c.interpolated += r - j;
    } else {
      exactly(j, r);
    }
    j = r;
  }
  return acc.c;
}

template <class Law>
EdfStatistics edf_statistics_of(const Law& law, std::span<const double> x, EdfEvaluation how) {
  const std::size_t m = x.size();
  const std::size_t chunks = (m + kEdfChunk - 1) / kEdfChunk;
  std::vector<EdfChunk> part(chunks);
  const auto nchunks = static_cast<std::ptrdiff_t>(chunks);
#pragma omp parallel for schedule(dynamic, 1) if (m >= kEdfParallelMin)
  for (std::ptrdiff_t c = 0; c < nchunks; ++c) {
    const std::size_t b = std::size_t(c) * kEdfChunk;
    part[std::size_t(c)] = edf_chunk(law, x, b, std::min(m, b + kEdfChunk), how);
  }
  double dmax = 0.0;
  long double s = 0.0L;
  std::uint64_t interpolated = 0;
  for (const EdfChunk& c : part) {
    dmax = std::max(dmax, c.dmax);
    s += c.ad_sum;
    interpolated += c.interpolated;
  }
  const double a2 = double(-static_cast<long double>(m) - s / static_cast<long double>(m));
  // NaN: -inf + inf from points outside the support on both sides; +inf stands for "outside".
  return {dmax, std::isnan(a2) ? kInf : a2, interpolated};
}

}  // namespace

EdfStatistics edf_statistics(const Sid& d, std::span<const double> sorted, EdfEvaluation how) {
  check_sorted(sorted, "edf_statistics");
  return std::visit([&](const auto& law) { return edf_statistics_of(law, sorted, how); }, d);
}

// ---- tail checks and QQ ------------------------------------------------------------------------
TailCheck tail_check(const Sid& d, MagnitudePasses& passes, const MagnitudeStats& s, double density) {
  check_density(density);  // at 1: threshold 0, every non-zero finite element observed
  TailCheck c;
  c.density = density;
  const double n = double(passes.size());
  c.predicted = n * density;
  const double q = s.count ? density * n / double(s.count) : 1.0;
  c.threshold = q >= 1.0 ? 0.0 : quantile_c(d, q);
  c.observed = count_selected(passes, c.threshold);  // at or above, as every method counts
  return c;
}

std::vector<QQPoint> qq_points(const Sid& d, std::span<const double> sorted, int points) {
  check_sorted(sorted, "qq_points");
  if (points < 1) throw Error("qq_points: needs at least one point");
  std::vector<QQPoint> out;
  const double last = double(sorted.size() - 1);
  for (int j = 1; j <= points; ++j) {
    const double p = (j - 0.5) / points;
    const double pos = p * last;
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    const double frac = pos - double(lo);
    out.push_back({p, quantile(d, p), sorted[lo] + frac * (sorted[hi] - sorted[lo])});
  }
  return out;
}

}  // namespace gs::fitting
