#pragma once
// The heap behaviour gradscope's programs set once at process start. glibc's malloc serves blocks
// above its mmap threshold (128 KiB at first, raised as large blocks are freed) straight from the
// kernel and returns them on free, so every training step's large temporary tensors and every
// fresh selection buffer are mapped, faulted in page by page, and unmapped again: page faults
// were the top cost of `gradscope capture` in perf. Keeping blocks up to 256 MiB in the heap and
// trimming it only past 1 GiB of free memory makes the second step reuse the first's pages
// (docs/BENCHMARKS.md, "Heap settings", has the figures). GS_MALLOC_DEFAULTS=1 keeps glibc's
// defaults, for measuring the difference.
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gs {

// Returns whether the settings were applied (glibc, and not opted out).
inline bool tune_allocator() {
#if defined(__GLIBC__)
  const char* keep = std::getenv("GS_MALLOC_DEFAULTS");
  if (keep && std::strcmp(keep, "1") == 0) return false;
  constexpr int kMmapThreshold = 256 << 20;  // blocks up to this come from the heap
  constexpr int kTrimThreshold = 1 << 30;    // free memory the heap keeps before trimming
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace gs
