// Distributions: validation, the Boost.Math parts (gamma incomplete functions and their inverses,
// erfc_inv) and the careful tail forms. The closed forms shared with the GPU live in formulas.hpp.
#include "gs/fitting/distributions.hpp"

#include <boost/math/special_functions/erf.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/formulas.hpp"

namespace gs::fitting {
namespace {

namespace bmp = boost::math::policies;
// Overflow gives +inf instead of throwing: quantiles at q -> 0 are legitimately huge. No promotion
// of double to long double: Boost's default evaluates in x87 long double, several times slower for
// the incomplete gamma function (docs/BENCHMARKS.md, "Analysis throughput": the time per call of
// each), while the double evaluation stays within a few ulps (the scipy
// reference tests in tests/fitting hold at 1e-9 relative and tighter).
using Policy = bmp::policy<bmp::overflow_error<bmp::errno_on_error>, bmp::promote_double<false>>;

constexpr double kInf = std::numeric_limits<double>::infinity();

void require(bool ok, const char* what, double got) {
  if (!ok) {
    std::ostringstream os;
    os << what << " (got " << got << ")";
    throw Error(os.str());
  }
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0.0; }

void check_probability(double p, const char* fn) {
  if (!(p >= 0.0 && p <= 1.0)) {
    std::ostringstream os;
    os << fn << ": probability must lie in [0, 1] (got " << p << ")";
    throw Error(os.str());
  }
}

// ln(p) from p and its complement q = 1 - p computed separately, whichever is accurate.
double log_from(double p, double q) { return p < 0.5 ? std::log(p) : std::log1p(-q); }

}  // namespace

namespace formula::detail {
double std_normal_quantile_c_host(double q) {
  if (q <= 0.0) return kInf;
  if (q >= 1.0) return -kInf;
  return boost::math::constants::root_two<double>() * boost::math::erfc_inv(2.0 * q, Policy());
}
double gamma_q_inv_host(double alpha, double q) { return boost::math::gamma_q_inv(alpha, q, Policy()); }
}  // namespace formula::detail

// ---- constructors ------------------------------------------------------------------------------
Exponential::Exponential(double beta) : beta_(beta) {
  require(positive_finite(beta), "Exponential: scale beta must be finite and > 0", beta);
}
Gamma::Gamma(double alpha, double beta) : alpha_(alpha), beta_(beta) {
  require(positive_finite(alpha), "Gamma: shape alpha must be finite and > 0", alpha);
  require(positive_finite(beta), "Gamma: scale beta must be finite and > 0", beta);
}
GeneralizedPareto::GeneralizedPareto(double xi, double sigma) : xi_(xi), sigma_(sigma) {
  require(std::isfinite(xi), "GeneralizedPareto: shape xi must be finite", xi);
  require(positive_finite(sigma), "GeneralizedPareto: scale sigma must be finite and > 0", sigma);
}
double GeneralizedPareto::upper() const { return formula::gpareto_upper(xi_, sigma_); }
Normal::Normal(double mu, double sigma) : mu_(mu), sigma_(sigma) {
  require(std::isfinite(mu), "Normal: mean mu must be finite", mu);
  require(positive_finite(sigma), "Normal: standard deviation sigma must be finite and > 0", sigma);
}
Laplace::Laplace(double mu, double b) : mu_(mu), b_(b) {
  require(std::isfinite(mu), "Laplace: location mu must be finite", mu);
  require(positive_finite(b), "Laplace: scale b must be finite and > 0", b);
}

// ---- exponential -------------------------------------------------------------------------------
double logpdf(const Exponential& d, double x) { return formula::exponential_logpdf(x, d.beta()); }
double pdf(const Exponential& d, double x) { return std::exp(logpdf(d, x)); }
double cdf(const Exponential& d, double x) { return formula::exponential_cdf(x, d.beta()); }
double cdf(const Complement<Exponential>& c) { return formula::exponential_sf(c.value, c.dist.beta()); }
double log_cdf(const Exponential& d, double x) { return x <= 0.0 ? -kInf : std::log(-std::expm1(-x / d.beta())); }
double log_cdf(const Complement<Exponential>& c) { return c.value <= 0.0 ? 0.0 : -c.value / c.dist.beta(); }
double quantile(const Exponential& d, double p) {
  check_probability(p, "quantile(Exponential)");
  return formula::exponential_quantile(p, d.beta());
}
double quantile(const Complement<Exponential>& c) {
  check_probability(c.value, "quantile(complement(Exponential))");
  return formula::exponential_quantile_c(c.value, c.dist.beta());
}
double mean(const Exponential& d) { return d.beta(); }
double variance(const Exponential& d) { return d.beta() * d.beta(); }

// ---- gamma -------------------------------------------------------------------------------------
double logpdf(const Gamma& d, double x) {
  const double a = d.alpha(), b = d.beta();
  if (x < 0.0) return -kInf;
  if (x == 0.0) return a < 1.0 ? kInf : (a == 1.0 ? -std::log(b) : -kInf);
  return (a - 1.0) * std::log(x) - x / b - std::lgamma(a) - a * std::log(b);
}
double pdf(const Gamma& d, double x) {
  if (x <= 0.0) return std::exp(logpdf(d, x));
  return boost::math::gamma_p_derivative(d.alpha(), x / d.beta(), Policy()) / d.beta();
}
double cdf(const Gamma& d, double x) {
  return x <= 0.0 ? 0.0 : boost::math::gamma_p(d.alpha(), x / d.beta(), Policy());
}
double cdf(const Complement<Gamma>& c) {
  return c.value <= 0.0 ? 1.0 : boost::math::gamma_q(c.dist.alpha(), c.value / c.dist.beta(), Policy());
}
double log_cdf(const Gamma& d, double x) {
  if (x <= 0.0) return -kInf;
  const double a = d.alpha(), z = x / d.beta();
  const double p = cdf(d, x);
  if (p == 0.0) return a * std::log(z) - z - std::lgamma(a + 1.0);  // leading term of the series
  return log_from(p, p < 0.5 ? 0.0 : cdf(complement(d, x)));
}
double log_cdf(const Complement<Gamma>& c) {
  if (c.value <= 0.0) return 0.0;
  const double a = c.dist.alpha(), z = c.value / c.dist.beta();
  const double q = cdf(c);
  if (q == 0.0) return (a - 1.0) * std::log(z) - z - std::lgamma(a);  // leading asymptotic term
  return log_from(q, q < 0.5 ? 0.0 : cdf(c.dist, c.value));
}
double quantile(const Gamma& d, double p) {
  check_probability(p, "quantile(Gamma)");
  if (p == 0.0) return 0.0;
  if (p == 1.0) return kInf;
  return d.beta() * boost::math::gamma_p_inv(d.alpha(), p, Policy());
}
double quantile(const Complement<Gamma>& c) {
  check_probability(c.value, "quantile(complement(Gamma))");
  if (c.value == 1.0) return 0.0;
  if (c.value == 0.0) return kInf;
  return formula::gamma_quantile_c(c.value, c.dist.alpha(), c.dist.beta());
}
double mean(const Gamma& d) { return d.alpha() * d.beta(); }
double variance(const Gamma& d) { return d.alpha() * d.beta() * d.beta(); }

// ---- generalized Pareto ------------------------------------------------------------------------
double logpdf(const GeneralizedPareto& d, double x) { return formula::gpareto_logpdf(x, d.xi(), d.sigma()); }
double pdf(const GeneralizedPareto& d, double x) { return std::exp(logpdf(d, x)); }
double cdf(const GeneralizedPareto& d, double x) { return formula::gpareto_cdf(x, d.xi(), d.sigma()); }
double cdf(const Complement<GeneralizedPareto>& c) { return formula::gpareto_sf(c.value, c.dist.xi(), c.dist.sigma()); }
double log_cdf(const GeneralizedPareto& d, double x) {
  if (x <= 0.0) return -kInf;
  const double logsf = formula::gpareto_logsf(x, d.xi(), d.sigma());
  return std::log(-std::expm1(logsf));
}
double log_cdf(const Complement<GeneralizedPareto>& c) {
  return formula::gpareto_logsf(c.value, c.dist.xi(), c.dist.sigma());
}
double quantile(const GeneralizedPareto& d, double p) {
  check_probability(p, "quantile(GeneralizedPareto)");
  if (p == 1.0) return d.upper();
  return formula::gpareto_quantile(p, d.xi(), d.sigma());
}
double quantile(const Complement<GeneralizedPareto>& c) {
  check_probability(c.value, "quantile(complement(GeneralizedPareto))");
  if (c.value == 0.0) return c.dist.upper();
  return formula::gpareto_quantile_c(c.value, c.dist.xi(), c.dist.sigma());
}
double mean(const GeneralizedPareto& d) { return d.xi() < 1.0 ? d.sigma() / (1.0 - d.xi()) : kInf; }
double variance(const GeneralizedPareto& d) {
  const double xi = d.xi(), s = d.sigma();
  return xi < 0.5 ? s * s / ((1.0 - xi) * (1.0 - xi) * (1.0 - 2.0 * xi)) : kInf;
}

// ---- normal ------------------------------------------------------------------------------------
double logpdf(const Normal& d, double x) { return formula::normal_logpdf(x, d.mu(), d.sigma()); }
double pdf(const Normal& d, double x) { return std::exp(logpdf(d, x)); }
double cdf(const Normal& d, double x) { return formula::normal_cdf(x, d.mu(), d.sigma()); }
double cdf(const Complement<Normal>& c) { return formula::normal_sf(c.value, c.dist.mu(), c.dist.sigma()); }
namespace {
// ln Phi(z) for the standard normal, accurate also where Phi underflows (z < -37).
double log_std_normal_cdf(double z) {
  if (z > -30.0) {
    const double p = 0.5 * std::erfc(-z / std::sqrt(2.0));
    return log_from(p, 0.5 * std::erfc(z / std::sqrt(2.0)));
  }
  // Mills ratio: Phi(z) = phi(z)/|z| * (1 - 1/z^2 + 3/z^4 - ...)
  const double z2 = z * z;
  return -0.5 * z2 - 0.91893853320467274178 - std::log(-z) + std::log1p(-1.0 / z2 + 3.0 / (z2 * z2));
}
}  // namespace
double log_cdf(const Normal& d, double x) { return log_std_normal_cdf((x - d.mu()) / d.sigma()); }
double log_cdf(const Complement<Normal>& c) { return log_std_normal_cdf(-(c.value - c.dist.mu()) / c.dist.sigma()); }
double quantile(const Normal& d, double p) {
  check_probability(p, "quantile(Normal)");
  return formula::normal_quantile(p, d.mu(), d.sigma());
}
double quantile(const Complement<Normal>& c) {
  check_probability(c.value, "quantile(complement(Normal))");
  return formula::normal_quantile_c(c.value, c.dist.mu(), c.dist.sigma());
}
double mean(const Normal& d) { return d.mu(); }
double variance(const Normal& d) { return d.sigma() * d.sigma(); }

// ---- Laplace -----------------------------------------------------------------------------------
double logpdf(const Laplace& d, double x) { return -std::log(2.0 * d.b()) - std::fabs(x - d.mu()) / d.b(); }
double pdf(const Laplace& d, double x) { return std::exp(logpdf(d, x)); }
double cdf(const Laplace& d, double x) {
  const double z = (x - d.mu()) / d.b();
  return z < 0.0 ? 0.5 * std::exp(z) : 1.0 - 0.5 * std::exp(-z);
}
double cdf(const Complement<Laplace>& c) {
  const double z = (c.value - c.dist.mu()) / c.dist.b();
  return z > 0.0 ? 0.5 * std::exp(-z) : 1.0 - 0.5 * std::exp(z);
}
double log_cdf(const Laplace& d, double x) {
  const double z = (x - d.mu()) / d.b();
  return z < 0.0 ? std::log(0.5) + z : std::log1p(-0.5 * std::exp(-z));
}
double log_cdf(const Complement<Laplace>& c) {
  const double z = (c.value - c.dist.mu()) / c.dist.b();
  return z > 0.0 ? std::log(0.5) - z : std::log1p(-0.5 * std::exp(z));
}
double quantile(const Laplace& d, double p) {
  check_probability(p, "quantile(Laplace)");
  return p < 0.5 ? d.mu() + d.b() * std::log(2.0 * p) : d.mu() - d.b() * std::log(2.0 * (1.0 - p));
}
double quantile(const Complement<Laplace>& c) {
  check_probability(c.value, "quantile(complement(Laplace))");
  const double q = c.value, mu = c.dist.mu(), b = c.dist.b();
  return q < 0.5 ? mu - b * std::log(2.0 * q) : mu + b * std::log(2.0 * (1.0 - q));
}
double mean(const Laplace& d) { return d.mu(); }
double variance(const Laplace& d) { return 2.0 * d.b() * d.b(); }

// ---- cdf and both logs at once (goodness of fit) -----------------------------------------------
CdfPoint cdf_point(const Exponential& d, double x) {
  if (x <= 0.0) return {0.0, -kInf, 0.0};
  const double z = x / d.beta();
  const double f = -std::expm1(-z);
  return {f, std::log(f), -z};
}
CdfPoint cdf_point(const Gamma& d, double x) {
  if (x <= 0.0) return {0.0, -kInf, 0.0};
  const double a = d.alpha(), z = x / d.beta();
  // The median lies below the mean a, so z < a usually means P <= 1/2: evaluate that side, and
  // the other only when the guess was wrong (its complement would lose relative accuracy).
  double p, q;
  if (z < a) {
    p = boost::math::gamma_p(a, z, Policy());
    q = p <= 0.5 ? 1.0 - p : boost::math::gamma_q(a, z, Policy());
  } else {
    q = boost::math::gamma_q(a, z, Policy());
    p = q <= 0.5 ? 1.0 - q : boost::math::gamma_p(a, z, Policy());
  }
  CdfPoint r;
  r.cdf = p;
  // Underflow: the leading term of the series (P) or of the asymptotic expansion (Q).
  r.log_cdf = p == 0.0 ? a * std::log(z) - z - std::lgamma(a + 1.0) : log_from(p, q);
  r.log_sf = q == 0.0 ? (a - 1.0) * std::log(z) - z - std::lgamma(a) : log_from(q, p);
  return r;
}
CdfPoint cdf_point(const GeneralizedPareto& d, double x) {
  if (x <= 0.0) return {0.0, -kInf, 0.0};
  const double logsf = formula::gpareto_logsf(x, d.xi(), d.sigma());
  const double f = -std::expm1(logsf);
  return {f, std::log(f), logsf};
}
CdfPoint cdf_point(const Normal& d, double x) {
  const double z = (x - d.mu()) / d.sigma();
  if (std::fabs(z) < 30.0) {
    const double p = 0.5 * std::erfc(-z / std::sqrt(2.0)), q = 0.5 * std::erfc(z / std::sqrt(2.0));
    return {p, log_from(p, q), log_from(q, p)};
  }
  return {formula::normal_cdf(x, d.mu(), d.sigma()), log_std_normal_cdf(z), log_std_normal_cdf(-z)};
}

// ---- Sid dispatch ------------------------------------------------------------------------------
std::string_view name(const Sid& d) {
  static constexpr std::string_view names[] = {"exponential", "gamma", "gpareto", "normal"};
  return names[d.index()];
}
std::vector<std::pair<std::string, double>> params(const Sid& d) {
  struct V {
    std::vector<double> operator()(const Exponential& e) const { return {e.beta()}; }
    std::vector<double> operator()(const Gamma& g) const { return {g.alpha(), g.beta()}; }
    std::vector<double> operator()(const GeneralizedPareto& g) const { return {g.xi(), g.sigma()}; }
    std::vector<double> operator()(const Normal& n) const { return {n.mu(), n.sigma()}; }
  };
  const std::vector<double> values = std::visit(V{}, d);
  const auto& names = parameter_names(name(d));
  std::vector<std::pair<std::string, double>> out;
  for (std::size_t i = 0; i < values.size(); ++i) out.emplace_back(names[i], values[i]);
  return out;
}
int parameter_count(const Sid& d) { return d.index() == 0 ? 1 : 2; }

const std::vector<std::string>& parameter_names(std::string_view dist) {
  static const std::vector<std::pair<std::string_view, std::vector<std::string>>> names = {{"exponential", {"beta"}},
                                                                                           {"gamma", {"alpha", "beta"}},
                                                                                           {"gpareto", {"xi", "sigma"}},
                                                                                           {"normal", {"mu", "sigma"}}};
  for (const auto& [d, n] : names)
    if (d == dist) return n;
  throw Error("unknown distribution '" + std::string(dist) + "': use exponential, gamma, gpareto or normal");
}

Sid make_sid(std::string_view dist, std::span<const double> v) {
  const auto& names = parameter_names(dist);
  if (v.size() < names.size())
    throw Error("the " + std::string(dist) + " law needs " + std::to_string(names.size()) + " parameters (" +
                join(names, ", ") + "), got " + std::to_string(v.size()));
  if (dist == "exponential") return Exponential(v[0]);
  if (dist == "gamma") return Gamma(v[0], v[1]);
  if (dist == "gpareto") return GeneralizedPareto(v[0], v[1]);
  return Normal(v[0], v[1]);
}

double pdf(const Sid& d, double x) {
  return std::visit([x](const auto& v) { return pdf(v, x); }, d);
}
double cdf(const Sid& d, double x) {
  return std::visit([x](const auto& v) { return cdf(v, x); }, d);
}
double log_cdf(const Sid& d, double x) {
  return std::visit([x](const auto& v) { return log_cdf(v, x); }, d);
}
double log_sf(const Sid& d, double x) {
  return std::visit([x](const auto& v) { return log_cdf(complement(v, x)); }, d);
}
CdfPoint cdf_point(const Sid& d, double x) {
  return std::visit([x](const auto& v) { return cdf_point(v, x); }, d);
}
double quantile(const Sid& d, double p) {
  return std::visit([p](const auto& v) { return quantile(v, p); }, d);
}
double quantile_c(const Sid& d, double q) {
  return std::visit([q](const auto& v) { return quantile(complement(v, q)); }, d);
}

}  // namespace gs::fitting
