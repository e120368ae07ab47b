#pragma once
// Quantiles of a sample, as every report and benchmark of the project states them: linear
// interpolation between order statistics (numpy's default), NaN values left out.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gs {

// The q-quantile (q in [0, 1]) of the non-NaN values; NaN when there are none.
inline double quantile(std::vector<double> values, double q) {
  std::erase_if(values, [](double x) { return std::isnan(x); });
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double pos = q * double(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - double(lo)) * (values[hi] - values[lo]);
}

inline double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

}  // namespace gs
