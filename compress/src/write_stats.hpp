#pragma once
// A pass that writes a vector, taking StatsOnWrite's statistics on the way when asked. Internal
// to compress/.
#include <cstddef>
#include <span>

#include "gs/compress/compressor.hpp"
#include "gs/kernels/cpu.hpp"

namespace gs::compress::detail {

// fill(begin, end) writes out[begin, end): with s, chunk by chunk, each chunk's statistics taken
// right after it is written (kernels::cpu::stats_as_written: stats(out, s->fields) to the bit);
// without, in one call. fill must not throw.
template <class Fill>
void write_taking(std::span<const float> out, StatsOnWrite* s, Fill&& fill) {
  if (!s) {
    fill(std::size_t{0}, out.size());
    return;
  }
  s->taken = kernels::cpu::stats_as_written(out, s->fields, fill);
}

}  // namespace gs::compress::detail
