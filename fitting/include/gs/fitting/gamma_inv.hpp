#pragma once
// The inverse of the regularized upper incomplete gamma function, Q(a, x) = q, written for the
// device (GS_HD), where Boost.Math does not run: SIDCo-GP's first stage fits a gamma law and
// places its threshold at the complement quantile. The host takes Boost's (formulas.hpp:
// gamma_quantile_c); tests/fitting checks this one against it on the host.
#include <cmath>

#include "gs/base/hostdevice.hpp"

namespace gs::fitting::formula::detail {

// Q(a, x) for a > 0, x >= 0: the series of P below a + 1, Lentz's continued fraction above.
GS_HD inline double gamma_q_portable(double a, double x) {
  if (!(x > 0.0)) return 1.0;
  const double eps = 1e-16, tiny = 1e-300;
  const double front = ::exp(-x + a * ::log(x) - ::lgamma(a));
  if (x < a + 1.0) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int i = 0; i < 1000; ++i) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (::fabs(del) < ::fabs(sum) * eps) break;
    }
    return 1.0 - sum * front;
  }
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -double(i) * (double(i) - a);
    b += 2.0;
    d = an * d + b;
    d = ::fabs(d) < tiny ? tiny : d;
    c = b + an / c;
    c = ::fabs(c) < tiny ? tiny : c;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (::fabs(del - 1.0) < eps) break;
  }
  return front * h;
}

// x with Q(a, x) = q, 0 < q < 1: a normal-approximation start (Wilson-Hilferty for a > 1), then
// Halley steps on P(a, x) - (1 - q), written as q - Q(a, x) so a small q keeps its digits.
GS_HD inline double gamma_q_inv_portable(double a, double q) {
  if (!(q < 1.0)) return 0.0;
  if (!(q > 0.0)) return INFINITY;
  const double a1 = a - 1.0, gln = ::lgamma(a), p = 1.0 - q;
  double x;
  if (a > 1.0) {
    const double pp = q < 0.5 ? q : p;
    const double t = ::sqrt(-2.0 * ::log(pp));
    double z = (2.30753 + t * 0.27061) / (1.0 + t * (0.99229 + t * 0.04481)) - t;
    if (q < 0.5) z = -z;  // the upper tail: above the median
    const double w = 1.0 - 1.0 / (9.0 * a) - z / (3.0 * ::sqrt(a));
    x = a * w * w * w;
    x = x > 1e-3 ? x : 1e-3;
  } else {
    const double t = 1.0 - a * (0.253 + a * 0.12);
    x = p < t ? ::pow(p / t, 1.0 / a) : 1.0 - ::log(1.0 - (p - t) / (1.0 - t));
  }
  for (int j = 0; j < 40; ++j) {
    if (!(x > 0.0)) return 0.0;
    const double err = q - gamma_q_portable(a, x);        // P(a, x) - p
    const double dens = ::exp(-x + a1 * ::log(x) - gln);  // dP/dx
    if (!(dens > 0.0)) break;
    const double u = err / dens;
    const double bend = u * (a1 / x - 1.0);
    const double step = u / (1.0 - 0.5 * (bend < 1.0 ? bend : 1.0));
    x -= step;
    if (!(x > 0.0)) x = 0.5 * (x + step);
    if (::fabs(step) < 1e-15 * x) break;
  }
  return x;
}

}  // namespace gs::fitting::formula::detail
