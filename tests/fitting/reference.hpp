#pragma once
// Loads tests/reference/fitting_reference.txt ("key value" lines written by make_reference.py with
// scipy) and the fixed samples next to it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gs::testing {

inline const std::map<std::string, double>& reference() {
  static const std::map<std::string, double> values = [] {
    std::map<std::string, double> m;
    std::ifstream in(std::string(GS_TEST_REFERENCE_DIR) + "/fitting_reference.txt");
    if (!in) throw std::runtime_error("missing tests/reference/fitting_reference.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream is(line);
      std::string key, value;
      is >> key >> value;
      m[key] = std::stod(value);
    }
    return m;
  }();
  return values;
}

inline double ref_value(const std::string& key) {
  const auto& m = reference();
  auto it = m.find(key);
  if (it == m.end()) throw std::runtime_error("reference value missing: " + key);
  return it->second;
}

inline std::vector<float> reference_sample(const std::string& name) {
  std::ifstream in(std::string(GS_TEST_REFERENCE_DIR) + "/sample_" + name + ".txt");
  if (!in) throw std::runtime_error("missing reference sample " + name);
  std::vector<float> v;
  double x;
  while (in >> x) v.push_back(float(x));
  return v;
}

// |a - b| <= rel * |b| (or <= rel when b == 0).
inline ::testing::AssertionResult near_rel(double a, double b, double rel) {
  const double tol = rel * (b == 0.0 ? 1.0 : std::fabs(b));
  if (std::fabs(a - b) <= tol || (std::isinf(a) && a == b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b << " (rel diff " << std::fabs(a - b) / std::fabs(b) << " > "
                                       << rel << ")";
}

// Python's repr of the probabilities make_reference.py uses, with their values.
inline const std::vector<std::pair<std::string, double>>& reference_probabilities() {
  static const std::vector<std::pair<std::string, double>> p = {{"0.5", 0.5},    {"0.1", 0.1},     {"0.01", 1e-2},
                                                                {"0.001", 1e-3}, {"0.0001", 1e-4}, {"1e-05", 1e-5},
                                                                {"1e-06", 1e-6}, {"1e-07", 1e-7}};
  return p;
}

}  // namespace gs::testing
