#pragma once
// Sparsity-inducing distributions (SIDs) of x = |g| and their signed relatives, as small
// immutable value types validated on construction (gs::Error for bad parameters). Operations are
// free functions in Boost.Math's pattern:
//   pdf(d, x), logpdf(d, x), cdf(d, x), quantile(d, p),
//   cdf(complement(d, x)) = P(X > x),  quantile(complement(d, q)) = x with P(X > x) = q,
//   log_cdf(d, x), log_cdf(complement(d, x)) = ln P(X > x)   (for tails: Anderson-Darling).
// Arguments outside [0, 1] for probabilities throw gs::Error; x outside the support is allowed and
// gives the obvious limits (pdf 0, cdf 0 or 1).
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gs::fitting {

// Exponential with scale beta (mean beta) on x >= 0: |g| for Laplace g.
class Exponential {
 public:
  explicit Exponential(double beta);
  double beta() const { return beta_; }

 private:
  double beta_;
};

// Gamma with shape alpha and scale beta on x >= 0.
class Gamma {
 public:
  Gamma(double alpha, double beta);
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }

 private:
  double alpha_, beta_;
};

// Generalized Pareto with shape xi (any finite real), scale sigma > 0, location 0.
// Support [0, inf) for xi >= 0, [0, -sigma/xi] for xi < 0.
class GeneralizedPareto {
 public:
  GeneralizedPareto(double xi, double sigma);
  double xi() const { return xi_; }
  double sigma() const { return sigma_; }
  double upper() const;  // end of the support (+inf when xi >= 0)

 private:
  double xi_, sigma_;
};

// Normal with mean mu and standard deviation sigma > 0.
class Normal {
 public:
  Normal(double mu, double sigma);
  double mu() const { return mu_; }
  double sigma() const { return sigma_; }

 private:
  double mu_, sigma_;
};

// Laplace with location mu and scale b > 0: the signed view of the exponential SID.
class Laplace {
 public:
  Laplace(double mu, double b);
  double mu() const { return mu_; }
  double b() const { return b_; }

 private:
  double mu_, b_;
};

// The tail form of an argument: complement(d, x) in cdf means P(X > x); in quantile it means the
// x with P(X > x) = q.
template <class Dist>
struct Complement {
  Dist dist;
  double value;
};
template <class Dist>
Complement<Dist> complement(const Dist& d, double value) {
  return {d, value};
}

#define GS_DECLARE_DIST_OPS(D)             \
  double pdf(const D& d, double x);        \
  double logpdf(const D& d, double x);     \
  double cdf(const D& d, double x);        \
  double cdf(const Complement<D>& c);      \
  double log_cdf(const D& d, double x);    \
  double log_cdf(const Complement<D>& c);  \
  double quantile(const D& d, double p);   \
  double quantile(const Complement<D>& c); \
  double mean(const D& d);                 \
  double variance(const D& d);

GS_DECLARE_DIST_OPS(Exponential)
GS_DECLARE_DIST_OPS(Gamma)
GS_DECLARE_DIST_OPS(GeneralizedPareto)
GS_DECLARE_DIST_OPS(Normal)
GS_DECLARE_DIST_OPS(Laplace)
#undef GS_DECLARE_DIST_OPS

// The four SIDs the fitting report handles, by name.
using Sid = std::variant<Exponential, Gamma, GeneralizedPareto, Normal>;

// "exponential", "gamma", "gpareto", "normal".
std::string_view name(const Sid& d);
// Parameters by their report names: exponential {beta}; gamma {alpha, beta} (shape, scale);
// gpareto {xi, sigma}; normal {mu, sigma}.
std::vector<std::pair<std::string, double>> params(const Sid& d);
// Free parameters counted by AIC (location is fixed at 0 and not counted).
int parameter_count(const Sid& d);
// The parameter names of the SID named `dist`, in params()'s order (the analysis store's param1,
// param2); gs::Error naming the SIDs for an unknown name.
const std::vector<std::string>& parameter_names(std::string_view dist);
// The SID named `dist` with its parameters in parameter_names()'s order (values beyond them are
// ignored: the store's NaN param2 of the exponential); gs::Error for an unknown name, too few
// values or parameters the law refuses.
Sid make_sid(std::string_view dist, std::span<const double> values);

// F(x), ln F(x) and ln P(X > x) from one evaluation of the law: what the goodness-of-fit tests
// need at every sorted point. Each log keeps full relative accuracy in its own tail (the
// complement is taken from whichever of F and 1 - F is the smaller); for the gamma law one
// incomplete-gamma call per point where the smaller side is guessed right, two otherwise.
struct CdfPoint {
  double cdf = 0.0;
  double log_cdf = 0.0;
  double log_sf = 0.0;
};
CdfPoint cdf_point(const Exponential& d, double x);
CdfPoint cdf_point(const Gamma& d, double x);
CdfPoint cdf_point(const GeneralizedPareto& d, double x);
CdfPoint cdf_point(const Normal& d, double x);

// Dispatch helpers for code that holds a Sid.
double pdf(const Sid& d, double x);
double cdf(const Sid& d, double x);
double log_cdf(const Sid& d, double x);
double log_sf(const Sid& d, double x);  // ln P(X > x)
CdfPoint cdf_point(const Sid& d, double x);
double quantile(const Sid& d, double p);
double quantile_c(const Sid& d, double q);  // x with P(X > x) = q

}  // namespace gs::fitting
