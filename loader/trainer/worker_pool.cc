// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/worker_pool.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "loader/ring/futex.h"
#include "loader/trainer/process_watch.h"
#include "ringloader/errors.h"

extern char** environ;

namespace ringloader::trainer {
namespace {

// Fixed descriptor numbers in the worker, named on its command line.
constexpr int kWorkerRingFd = 3;
constexpr int kWorkerConfigFd = 4;

bool is_executable(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string folder_of_this_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&folder_of_this_library), &info) == 0 ||
      !info.dli_fname) {
    return ".";
  }
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// A CLOEXEC copy above the low numbers, so dup2 onto 3 and 4 in the child
// never meets a source that already is 3 or 4 (dup2(fd, fd) would keep
// CLOEXEC set and the worker would not get it).
int high_copy(int fd) {
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (copy < 0) throw Error(std::string("ringloader: dup: ") + std::strerror(errno));
  return copy;
}

}  // namespace

std::string WorkerPool::find_executable(const std::string& configured) {
  std::string path = configured;
  if (path.empty()) {
    const char* env = std::getenv("RINGLOADER_WORKER");
    path = env && *env ? env : folder_of_this_library() + "/ringloader-worker";
  }
  if (!is_executable(path)) {
    throw OptionError("ringloader: worker executable " + path +
                      " not found or not executable (set "
                      "LoaderOptions::worker_executable or $RINGLOADER_WORKER)");
  }
  return path;
}

WorkerPool::WorkerPool(const ring::Ring& ring, int config_fd, int count,
                       std::vector<std::string> command)
    : ring_(ring), command_(std::move(command)) {
  if (command_.empty()) throw OptionError("ringloader: empty worker command");
  ring_fd_ = high_copy(ring.fd());
  config_fd_ = high_copy(config_fd);
  try {
    for (int index = 0; index < count; ++index) {
      started_ns_.push_back(ring::monotonic_ns());
      pids_.push_back(spawn(index));
      pidfds_.push_back(-1);
      retired_.push_back(0);
      watch(index);
    }
  } catch (...) {
    shutdown();
    close(ring_fd_);
    close(config_fd_);
    throw;
  }
}

WorkerPool::~WorkerPool() {
  shutdown();
  for (size_t index = 0; index < pidfds_.size(); ++index) unwatch(static_cast<int>(index));
  close(ring_fd_);
  close(config_fd_);
}

void WorkerPool::watch(int index) {
  unwatch(index);
  pidfds_[index] = open_pidfd(pids_[index]);
}

void WorkerPool::unwatch(int index) {
  if (pidfds_[index] >= 0) close(pidfds_[index]);
  pidfds_[index] = -1;
}

int WorkerPool::spawn(int index) {
  const int ring_fd = ring_fd_;
  const int config_fd = config_fd_;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  posix_spawn_file_actions_adddup2(&actions, ring_fd, kWorkerRingFd);
  posix_spawn_file_actions_adddup2(&actions, config_fd, kWorkerConfigFd);
  // Own process group: a terminal's Ctrl-C reaches the trainer, which then
  // shuts workers down, instead of killing workers mid-batch under it.
  sigset_t no_signals, default_signals;
  sigemptyset(&no_signals);
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGPIPE);
  // A trainer that ignores SIGCHLD must not pass that on: a worker waits
  // for its pipe: shard commands.
  sigaddset(&default_signals, SIGCHLD);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF |
                                            POSIX_SPAWN_SETPGROUP);
  std::string ring_arg = std::to_string(kWorkerRingFd);
  std::string config_arg = std::to_string(kWorkerConfigFd);
  std::string index_arg = std::to_string(index);
  std::string parent_arg = std::to_string(getpid());
  std::vector<const char*> argv;
  for (const std::string& word : command_) argv.push_back(word.c_str());
  for (const char* word : {"--ring-fd", ring_arg.c_str(), "--config-fd",
                           config_arg.c_str(), "--index", index_arg.c_str(),
                           "--parent-pid", parent_arg.c_str()}) {
    argv.push_back(word);
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  int error = posix_spawn(&pid, command_[0].c_str(), &actions, &attributes,
                          const_cast<char* const*>(argv.data()), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw WorkerError("ringloader: cannot spawn worker " + std::to_string(index) +
                      " (" + command_[0] + "): " + std::strerror(error));
  }
  return pid;
}

std::vector<int> WorkerPool::pids() const {
  std::vector<int> alive;
  for (int pid : pids_) {
    if (pid > 0) alive.push_back(pid);
  }
  return alive;
}

namespace {

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status)) +
         (WEXITSTATUS(status) == 3 ? " (its error is on stderr)" : "");
}

// A worker's process group (its pid: spawned with POSIX_SPAWN_SETPGROUP 0)
// holds whatever runs on its behalf: a Python worker's stub spawned here,
// and the forked worker that joined the stub's group (python/ringloader/
// _zygote.py). Killing the group kills both at once, so a worker the pool
// has given up on never touches the ring again.
void kill_group(int pid) {
  if (kill(-pid, SIGKILL) != 0) kill(pid, SIGKILL);
}

}  // namespace

std::vector<WorkerExit> WorkerPool::reap() {
  std::vector<WorkerExit> exits;
  for (size_t index = 0; index < pids_.size(); ++index) {
    if (pids_[index] <= 0) continue;
    // Peek first (WNOWAIT): while the ended process is unreaped its pid, the
    // group's id, cannot be reused, so the group kill below hits only what
    // is left of this worker, before its replacement touches the ring.
    siginfo_t info{};
    const int peek = waitid(P_PID, static_cast<id_t>(pids_[index]), &info,
                            WEXITED | WNOHANG | WNOWAIT);
    // Not waitable, yet ended: the host program reaped it first (SIGCHLD
    // ignored, a waitpid(-1) elsewhere). Its pidfd still tells.
    const bool hidden = peek != 0 && errno == ECHILD &&
                        ended_unseen(pids_[index], pidfds_[index]);
    if (peek == 0 && info.si_pid != pids_[index]) continue;  // still running
    if (peek == 0) kill_group(pids_[index]);
    // Reaped already: only the group (its id stays taken while a member
    // lives) may still hold what runs on the worker's behalf.
    if (hidden) kill(-pids_[index], SIGKILL);
    int status = 0;
    if (!hidden && waitpid(pids_[index], &status, WNOHANG) != pids_[index]) continue;
    const int pid = pids_[index];
    pids_[index] = -1;
    unwatch(static_cast<int>(index));
    if (retired_[index] && !hidden && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      continue;  // a retired worker that finished: nothing to recover
    }
    retired_[index] = 0;  // died instead: recovered and replaced as usual
    WorkerExit exit;
    exit.index = static_cast<int>(index);
    exit.pid = pid;
    exit.status = status;
    exit.status_known = !hidden;
    exit.started = ring_.worker(static_cast<uint32_t>(index))
                       .ready.load(std::memory_order_acquire) != 0;
    exit.how = hidden ? "ended (its exit status went to the host program: SIGCHLD "
                        "ignored or a waitpid(-1) elsewhere)"
                      : describe_status(status);
    exits.push_back(exit);
  }
  return exits;
}

void WorkerPool::kill_worker(int index) {
  if (pids_[index] > 0) kill_group(pids_[index]);
}

void WorkerPool::add_worker() {
  const int index = size();
  if (static_cast<uint32_t>(index) >= ring_.geometry().worker_capacity) {
    throw WorkerError("ringloader: cannot add worker " + std::to_string(index) +
                      ": the ring was made for " +
                      std::to_string(ring_.geometry().worker_capacity));
  }
  pids_.push_back(-1);
  started_ns_.push_back(0);
  pidfds_.push_back(-1);
  retired_.push_back(0);
  try {
    respawn(index);
  } catch (...) {
    started_ns_.pop_back();
    pids_.pop_back();
    pidfds_.pop_back();
    retired_.pop_back();
    throw;
  }
}

void WorkerPool::retire_worker(int index) {
  if (pids_[index] <= 0 || retired_[index]) return;
  retired_[index] = 1;
  ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(index));
  control.retire.store(1, std::memory_order_release);
  // Wake it if it waits for a plan: it then sees the flag and exits.
  ring_.claims().plan_signal.fetch_add(1, std::memory_order_release);
  ring::futex_wake_all(ring_.claims().plan_signal);
}

int WorkerPool::live_workers() const {
  int live = 0;
  for (size_t index = 0; index < pids_.size(); ++index) {
    live += pids_[index] > 0 && !retired_[index];
  }
  return live;
}

void WorkerPool::respawn(int index) {
  ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(index));
  control.ready.store(0, std::memory_order_relaxed);
  control.pid.store(0, std::memory_order_relaxed);
  control.retire.store(0, std::memory_order_relaxed);
  control.current_batch.store(ring::kNoBatch, std::memory_order_relaxed);
  control.current_sample.store(-1, std::memory_order_relaxed);
  control.heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
  // Release: the reset is visible to the new process (posix_spawn is a
  // barrier anyway; the order documents the intent).
  std::atomic_thread_fence(std::memory_order_release);
  started_ns_[index] = ring::monotonic_ns();
  pids_[index] = spawn(index);
  watch(index);
}

void WorkerPool::shutdown() {
  // In a fork child of the trainer (its Loader copy destroyed, its exit)
  // the workers and the ring are the parent's: leave them alone.
  if (!ring_.owned_here()) return;
  ring::ClaimControl& claims = ring_.claims();
  claims.shutdown.store(1, std::memory_order_release);
  claims.plan_signal.fetch_add(1, std::memory_order_release);
  ring::futex_wake_all(claims.plan_signal);
  for (uint32_t slot = 0; slot < ring_.geometry().slot_count; ++slot) {
    ring::futex_wake_all(ring_.slot(slot).state);
  }
  // Workers poll their flags at least every 100 ms; a decode in progress may
  // take longer, so give them a moment, then make sure.
  const uint64_t deadline = ring::monotonic_ns() + 500'000'000;
  for (int& pid : pids_) {
    while (pid > 0) {
      int status = 0;
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno == ECHILD)) {
        pid = -1;
      } else if (ring::monotonic_ns() > deadline) {
        kill_group(pid);
        waitpid(pid, &status, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
}

}  // namespace ringloader::trainer
