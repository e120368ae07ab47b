#pragma once
// Launcher: `gradscope train --workers W` starts W copies of this same binary on this machine, one
// per rank, hosting their TCPStore itself on a free loopback port. It watches them: when one exits
// with an error or is killed, the others are stopped at once and the launcher reports which one
// failed; it never waits on a dead group.
#include <string>
#include <vector>

#include "gs/distributed/config.hpp"

namespace gs::distributed {

// Runs the workers; returns rank 0's exit status when every worker succeeded. gs::Error naming the
// failed worker (and its exit status or signal) otherwise.
int launch_workers(const TrainConfig& config);

// Environment variable the launcher sets so that rank 0 connects to the launcher's store instead
// of hosting one.
inline constexpr const char* kStoreHostedEnv = "GS_DIST_STORE_HOSTED";
// ... and to the number of restarts so far (0 in the first attempt).
inline constexpr const char* kAttemptEnv = "GS_DIST_ATTEMPT";

}  // namespace gs::distributed
