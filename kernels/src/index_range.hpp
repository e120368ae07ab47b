#pragma once
// The check every selection makes before it writes indices of type Index: n elements must be
// addressable by them (int32: at most 2^31). Shared by the CPU kernels and the portable passes.
#include <cstdint>
#include <limits>
#include <string>

#include "gs/base/error.hpp"

namespace gs::kernels {

template <class Index>
void check_index_range(std::uint64_t n, const char* what) {
  if (n > static_cast<std::uint64_t>(std::numeric_limits<Index>::max()) + 1)
    throw gs::Error(std::string(what) + ": " + std::to_string(n) +
                    " elements cannot be addressed by int32 indices; use the int64 overload");
}

}  // namespace gs::kernels
