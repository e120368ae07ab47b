#pragma once
// Launcher: `gradscope train --workers W` starts W copies of this same binary on this machine, one
// per rank, hosting their TCPStore itself on a free loopback port. It watches them: when one exits
// with an error or is killed, the others are stopped at once and the launcher reports which one
// failed; it never waits on a dead group.
#include <functional>
#include <string>
#include <vector>

#include "gs/distributed/config.hpp"

namespace gs::distributed {

// One worker run in this process: ARGS its command line after the program's name ("train", then
// the worker's flags); returns its exit status.
using InProcessWorker = std::function<int(const std::vector<std::string>& args)>;

// Runs the workers; returns rank 0's exit status when every worker succeeded. gs::Error naming the
// failed worker (and its exit status or signal) otherwise. Given IN_PROCESS, and a kernels backend
// that holds no device state (cpu, cuda-host), each worker is a fork of this process, libtorch
// already loaded (about 0.65 s of CPU a worker that is not spent again), forked before the store's
// thread starts and told its port through a pipe; otherwise this binary is started anew.
int launch_workers(const TrainConfig& config, const InProcessWorker& in_process = {});

// Environment variable the launcher sets so that rank 0 connects to the launcher's store instead
// of hosting one.
inline constexpr const char* kStoreHostedEnv = "GS_DIST_STORE_HOSTED";
// ... and to the number of restarts so far (0 in the first attempt).
inline constexpr const char* kAttemptEnv = "GS_DIST_ATTEMPT";
// Set to 1, every worker is started anew from this binary, never forked (to run a worker under a
// debugger or a memory checker).
inline constexpr const char* kExecWorkersEnv = "GS_TRAIN_EXEC_WORKERS";

}  // namespace gs::distributed
