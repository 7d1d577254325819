// The trainer's side of the worker processes: spawning them with
// posix_spawn (no fork: the trainer may hold CUDA contexts and threads),
// noticing when one dies, and shutting them down.
#pragma once

#include <string>
#include <vector>

#include "loader/ring/ring.h"

namespace ringloader::trainer {

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
  // Throws WorkerError naming the worker, its pid, how it ended and the
  // batch it was filling, if any worker has exited.
  void check_alive();
  // Asks workers to stop, waits briefly, then kills what is left.
  void shutdown();

  // The worker executable: `configured` if set, else $RINGLOADER_WORKER,
  // else ringloader-worker next to the library that holds this code.
  static std::string find_executable(const std::string& configured);

 private:
  int spawn(int index, int ring_fd, int config_fd);
  std::string describe_exit(int index, int status) const;
  const ring::Ring& ring_;
  std::vector<std::string> command_;
  std::vector<int> pids_;  // -1 once reaped
};

}  // namespace ringloader::trainer
