#pragma once
// The message of the gs::Error a call throws ("(no error)" when it throws none), for tests that
// check what a refusal says.
#include <functional>
#include <string>

#include "gs/error.hpp"

namespace gs::test {

inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gs::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gs::test
