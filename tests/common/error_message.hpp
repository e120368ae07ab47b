#pragma once
// The message of the gs::Error a call throws, for tests that check what an error says.
#include <functional>
#include <string>

#include "gs/base/error.hpp"

namespace gs::testing {

// e.what() of the gs::Error f throws; "(no error)" when it throws none.
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const gs::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gs::testing
