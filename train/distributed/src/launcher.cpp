#include "gs/distributed/launcher.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "gs/distributed/checkpoint.hpp"
#include "gs/base/error.hpp"

extern char** environ;

namespace gs::distributed {

namespace {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

void stop_all(const std::vector<pid_t>& pids, std::vector<bool>& done) {
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (!done[i]) ::kill(pids[i], SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    while (!done[i]) {
      int st = 0;
      if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        done[i] = true;
      } else if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], &st, 0);
        done[i] = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
}

// A worker ended with an error or a signal (the launcher may restart the group).
struct WorkerFailed : Error {
  using Error::Error;
};

// One attempt: a fresh store, W workers, watched until all succeed (rank 0's exit status) or one
// fails (WorkerFailed, after the others are stopped).
int run_attempt(const TrainConfig& config, int attempt) {
  // The store lives in this process on a free loopback port, so concurrent runs never collide.
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(std::int64_t(config.timeout * 1000));
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  } catch (const std::exception& e) {
    throw Error(std::string("could not start the rendezvous store on 127.0.0.1: ") + e.what());
  }
  const int port = store->getPort();
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();

  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (v.rfind(kStoreHostedEnv, 0) != 0 && v.rfind(kAttemptEnv, 0) != 0) env_strings.emplace_back(v);
  }
  env_strings.push_back(std::string(kStoreHostedEnv) + "=1");
  env_strings.push_back(std::string(kAttemptEnv) + "=" + std::to_string(attempt));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<pid_t> pids;
  std::vector<bool> done;
  for (int r = 0; r < config.workers; ++r) {
    std::vector<std::string> args = {exe, "train"};
    for (auto& a : config.worker_args(r, port)) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      stop_all(pids, done);
      throw Error("could not start worker " + std::to_string(r) + ": " + std::strerror(rc));
    }
    pids.push_back(pid);
    done.push_back(false);
  }

  // Watch: the first worker to fail stops the rest.
  std::vector<int> status(pids.size(), 0);
  std::size_t finished = 0;
  while (finished < pids.size()) {
    bool progressed = false;
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int st = 0;
      const pid_t got = ::waitpid(pids[i], &st, WNOHANG);
      if (got != pids[i]) continue;
      done[i] = true;
      status[i] = st;
      ++finished;
      progressed = true;
      if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        stop_all(pids, done);
        throw WorkerFailed("worker " + std::to_string(i) + " failed (" + describe_status(st) +
                    "); stopped the other " + std::to_string(pids.size() - 1) + " worker(s)");
      }
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WEXITSTATUS(status[0]);
}

}  // namespace

int launch_workers(const TrainConfig& config) {
  config.validate();
  if (config.workers < 1) throw Error("--workers must be at least 1");
  TrainConfig run = config;
  for (int attempt = 0;; ++attempt) {
    try {
      return run_attempt(run, attempt);
    } catch (const WorkerFailed& e) {
      if (attempt >= config.max_restarts) throw Error(e.what());
      // Every worker restarts from the last complete checkpoint (or where this run began).
      std::optional<CheckpointInfo> last;
      if (!config.checkpoint.empty()) last = latest_checkpoint(config.checkpoint);
      run.resume = last ? last->dir.string() : config.resume;
      const std::string from =
          run.resume.empty() ? "from the first step (no checkpoint yet)" : "from " + run.resume;
      std::fprintf(stderr, "gradscope: %s; restart %d of %d, %s\n", e.what(), attempt + 1,
                   config.max_restarts, from.c_str());
    }
  }
}

}  // namespace gs::distributed
