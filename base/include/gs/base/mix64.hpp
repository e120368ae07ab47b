#pragma once
// splitmix64's finalizer: the hash behind every random choice (the kernels' element sampling on
// CPU and CUDA alike, the quantizers' random streams), written once for host and device.
#include <cstdint>

#include "gs/base/hostdevice.hpp"

namespace gs {

GS_HD inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace gs
