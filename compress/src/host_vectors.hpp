#pragma once
// Internal: the host vector checks the compressed step takes of a gradient or an accumulator.
#include <algorithm>
#include <cmath>
#include <span>

namespace gs::compress::detail {

inline bool any_nonfinite(std::span<const float> v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
}

inline double squared_norm(std::span<const float> v) {
  double s = 0.0;
  for (float x : v) s += double(x) * double(x);
  return s;
}

}  // namespace gs::compress::detail
