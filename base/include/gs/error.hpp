#pragma once
// gs::Error: what every library throws for a caller mistake or bad input. The message names the
// problem and, where there is one, what to do about it. Invariants use GS_ASSERT instead.
#include <cassert>
#include <stdexcept>
#include <string>

namespace gs {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gs

#define GS_ASSERT(cond) assert(cond)
