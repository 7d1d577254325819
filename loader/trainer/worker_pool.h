// SPDX-License-Identifier: BSD-3-Clause
// The trainer's side of the worker processes: spawning them with
// posix_spawn (no fork: the trainer may hold CUDA contexts and threads),
// noticing when one dies, killing a hung one, spawning its replacement, and
// shutting them down. What to do about a dead worker's batch is
// worker_recovery's business, not this file's.
#pragma once

#include <string>
#include <vector>

#include "loader/ring/ring.h"

namespace ringloader::trainer {

// A worker process that has ended, reaped.
struct WorkerExit {
  int index = 0;
  int pid = 0;
  int status = 0;   // as from waitpid
  bool started = false;  // it had attached to the ring (ready)
  // False when the host program reaped it first (SIGCHLD ignored, a
  // waitpid(-1) elsewhere): `status` is then unknown (0).
  bool status_known = true;
  // "was killed by signal 9 (Killed)", "exited with status 3 (...)"
  std::string how;
};

class WorkerPool {
 public:
  // Spawns `count` workers that inherit the ring and config memfds.
  // `command` is the worker's argv (command[0] its path); the ring
  // arguments are appended.
  WorkerPool(const ring::Ring& ring, int config_fd, int count,
             std::vector<std::string> command);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(pids_.size()); }
  std::vector<int> pids() const;
  int pid(int index) const { return pids_[index]; }
  // When worker `index` was last spawned (ring::monotonic_ns).
  uint64_t started_ns(int index) const { return started_ns_[index]; }
  // Reaps every worker that has exited since the last call (never blocks),
  // killing what is left of its process group first.
  // Their slots in the pool stay empty until respawn().
  std::vector<WorkerExit> reap();
  // SIGKILL to the worker's process group (a hung worker, and for a Python
  // worker the forked process that joined its stub's group); reap()
  // reports it once the kernel has it gone.
  void kill_worker(int index);
  // Starts a replacement for worker `index` (reaped) with the same command,
  // ring and configuration; its WorkerControl is reset, counters kept.
  void respawn(int index);
  // Starts one more worker (index size()), e.g. chosen by the autotuner.
  // Safe while batches are in flight: a new worker claims the next batch
  // through the ring's claim word like any other. Throws WorkerError when
  // the ring has no WorkerControl left for it (worker_capacity).
  void add_worker();
  // Asks worker `index` to finish the batch it holds and exit (the
  // autotuner's way back). Its clean exit is not reported by reap(); a
  // worker that dies before that is reported as usual.
  void retire_worker(int index);
  // Workers not yet reaped and not retired.
  int live_workers() const;
  // Asks workers to stop, waits briefly, then kills what is left.
  void shutdown();

  // The worker executable: `configured` if set, else $RINGLOADER_WORKER,
  // else ringloader-worker next to the library that holds this code.
  static std::string find_executable(const std::string& configured);

 private:
  int spawn(int index);
  const ring::Ring& ring_;
  std::vector<std::string> command_;
  std::vector<int> pids_;  // -1 once reaped
  std::vector<uint64_t> started_ns_;  // per worker: its last spawn
  std::vector<char> retired_;  // per worker: retire_worker() was called
  std::vector<int> pidfds_;  // per worker, -1 without (process_watch.h)
  void watch(int index);     // opens pidfds_[index] for pids_[index]
  void unwatch(int index);
  // CLOEXEC copies kept for respawns (see high_copy in the .cc).
  int ring_fd_ = -1;
  int config_fd_ = -1;
};

}  // namespace ringloader::trainer
