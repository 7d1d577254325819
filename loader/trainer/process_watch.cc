// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace ringloader::trainer {

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  // pidfds are always close-on-exec.
  long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

bool ended_unseen(int pid, int pidfd) {
  if (pidfd >= 0) {
    pollfd watch{pidfd, POLLIN, 0};
    int ready = poll(&watch, 1, 0);
    if (ready >= 0) return ready > 0;
  }
  // No pidfd: a pid we spawned that waitpid cannot see and that no longer
  // exists was reaped by someone else. (A recycled pid looks alive: then
  // the death is missed, as before pidfds.)
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace ringloader::trainer
