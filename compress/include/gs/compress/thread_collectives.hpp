#pragma once
// ThreadCollectives: W workers as threads of one process, for tests and benchmarks of compressors
// with their own exchange protocol. run_workers(W, fn) starts W threads, each calling fn with its
// own Collectives; an exception in one worker wakes the others with gs::Error (no hang), and every
// operation waits at most `timeout` for the rest.
#include <chrono>
#include <functional>
#include <memory>

#include "gs/compress/collectives.hpp"

namespace gs::compress {

// Calls fn(comm) on `workers` threads (comm.rank() = 0..workers-1) and joins them; rethrows the
// first worker's exception.
void run_workers(int workers, const std::function<void(Collectives&)>& fn,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));

}  // namespace gs::compress
