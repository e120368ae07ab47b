#include "gs/distributed/launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "gs/distributed/checkpoint.hpp"
#include "gs/base/error.hpp"
#include "gs/data/fashion_mnist.hpp"

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

// The environment of attempt ATTEMPT's workers: this process's, and the launcher's two variables.
std::vector<std::string> worker_environment(int attempt) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (v.rfind(kStoreHostedEnv, 0) != 0 && v.rfind(kAttemptEnv, 0) != 0) env.emplace_back(v);
  }
  char line[64];
  std::snprintf(line, sizeof line, "%s=1", kStoreHostedEnv);
  env.emplace_back(line);
  std::snprintf(line, sizeof line, "%s=%d", kAttemptEnv, attempt);
  env.emplace_back(line);
  return env;
}

// In a forked worker: the port from the launcher's pipe (0 when the launcher gave none).
int read_port(int fd) {
  int port = 0;
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&port);
  while (got < sizeof port) {
    const ssize_t n = ::read(fd, bytes + got, sizeof port - got);
    if (n > 0) {
      got += std::size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return 0;
    }
  }
  return port;
}

bool forks_workers(const TrainConfig& config, const InProcessWorker& in_process) {
  const std::string& backend = config.compression.backend;
  const char* exec = std::getenv(kExecWorkersEnv);
  return bool(in_process) && (backend == "cpu" || backend == "cuda-host") && !(exec && std::string(exec) == "1");
}

// One attempt: a fresh store, W workers, watched until all succeed (rank 0's exit status) or one
// fails (WorkerFailed, after the others are stopped).
// The workers started so far, and which of them the watch has seen end.
struct Workers {
  std::vector<pid_t> pids;
  std::vector<bool> done;
  void add(pid_t pid) {
    pids.push_back(pid);
    done.push_back(false);
  }
  void stop() { stop_all(pids, done); }
};

// Forks the workers while this process runs no store thread; each waits on its pipe for the
// store's port and then runs `train` in process. Returns the pipes' write ends.
std::vector<int> fork_workers(const TrainConfig& config, const std::vector<std::string>& env,
                              const InProcessWorker& in_process, Workers& w) {
  // The data decoded once here, for every worker (each fork takes its copy on write).
  data::preload_fashion_mnist("train");
  data::preload_fashion_mnist("test");
  std::fflush(nullptr);
  std::vector<int> port_pipes;
  for (int r = 0; r < config.workers; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      for (int fd : port_pipes) ::close(fd);
      w.stop();
      throw Error(std::string("could not start worker ") + std::to_string(r) + ": " + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      for (int fd : port_pipes) ::close(fd);
      const int port = read_port(fds[0]);
      ::close(fds[0]);
      if (port <= 0) ::_exit(1);  // the launcher could not start its store, and says so
      ::clearenv();
      for (const auto& v : env) ::putenv(const_cast<char*>(v.c_str()));
      std::vector<std::string> args = {"train"};
      for (auto& a : config.worker_args(r, port)) args.push_back(a);
      int rc = 1;
      try {
        rc = in_process(args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gradscope: error: %s\n", e.what());
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    ::close(fds[0]);
    if (pid < 0) {
      const int err = errno;
      ::close(fds[1]);
      for (int fd : port_pipes) ::close(fd);
      w.stop();
      throw Error("could not start worker " + std::to_string(r) + ": " + std::strerror(err));
    }
    port_pipes.push_back(fds[1]);
    w.add(pid);
  }
  return port_pipes;
}

// Hands the store's port to the forked workers. A worker that died before reading is seen by the
// watch; its pipe's write must not raise SIGPIPE here.
void send_port(const std::vector<int>& port_pipes, int port) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &before);
  for (int fd : port_pipes) {
    [[maybe_unused]] const ssize_t n = ::write(fd, &port, sizeof port);
    ::close(fd);
  }
  ::sigaction(SIGPIPE, &before, nullptr);
}

// Starts the workers as new processes of this binary (posix_spawn), the store's port given.
void spawn_workers(const TrainConfig& config, const std::vector<std::string>& env, int port, Workers& w) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings = env;
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (int r = 0; r < config.workers; ++r) {
    std::vector<std::string> args = {exe, "train"};
    for (auto& a : config.worker_args(r, port)) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      w.stop();
      throw Error("could not start worker " + std::to_string(r) + ": " + std::strerror(rc));
    }
    w.add(pid);
  }
}

// Watch: the first worker to fail stops the rest. Waiting on any child wakes at the first exit,
// so the worker that failed first is named, not a peer that failed because it did.
int watch_workers(Workers& w) {
  std::vector<int> status(w.pids.size(), 0);
  std::size_t finished = 0;
  while (finished < w.pids.size()) {
    int st = 0;
    const pid_t got = ::waitpid(-1, &st, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      w.stop();
      throw Error(std::string("could not watch the workers: ") + std::strerror(errno));
    }
    const auto it = std::find(w.pids.begin(), w.pids.end(), got);
    if (it == w.pids.end()) continue;
    const std::size_t i = std::size_t(it - w.pids.begin());
    w.done[i] = true;
    status[i] = st;
    ++finished;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      w.stop();
      throw WorkerFailed("worker " + std::to_string(i) + " failed (" + describe_status(st) + "); stopped the other " +
                         std::to_string(w.pids.size() - 1) + " worker(s)");
    }
  }
  return WEXITSTATUS(status[0]);
}

int run_attempt(const TrainConfig& config, int attempt, const InProcessWorker& in_process) {
  Workers w;
  const std::vector<std::string> env = worker_environment(attempt);
  // Forked workers first, while this process runs no store thread; each waits for the port.
  const bool fork = forks_workers(config, in_process);
  const std::vector<int> port_pipes = fork ? fork_workers(config, env, in_process, w) : std::vector<int>{};

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
    for (int fd : port_pipes) ::close(fd);
    w.stop();
    throw Error(std::string("could not start the rendezvous store on 127.0.0.1: ") + e.what());
  }
  if (fork)
    send_port(port_pipes, store->getPort());
  else
    spawn_workers(config, env, store->getPort(), w);
  return watch_workers(w);
}

}  // namespace

int launch_workers(const TrainConfig& config, const InProcessWorker& in_process) {
  config.validate();
  if (config.workers < 1) throw Error("--workers must be at least 1");
  TrainConfig run = config;
  for (int attempt = 0;; ++attempt) {
    try {
      return run_attempt(run, attempt, in_process);
    } catch (const WorkerFailed& e) {
      if (attempt >= config.max_restarts) throw Error(e.what());
      // Every worker restarts from the last complete checkpoint (or where this run began).
      std::optional<CheckpointInfo> last;
      if (!config.checkpoint.empty()) last = latest_checkpoint(config.checkpoint);
      run.resume = last ? last->dir.string() : config.resume;
      const std::string from = run.resume.empty() ? "from the first step (no checkpoint yet)" : "from " + run.resume;
      std::fprintf(stderr, "gradscope: %s; restart %d of %d, %s\n", e.what(), attempt + 1, config.max_restarts,
                   from.c_str());
    }
  }
}

}  // namespace gs::distributed
