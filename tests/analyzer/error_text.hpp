#pragma once
// The message of the gs::Error fn throws, or "(no error)": for asserting what a refusal says.
#include <functional>
#include <string>

#include "gs/base/error.hpp"

namespace gs::analyzer::test {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gs::analyzer::test
