// SPDX-License-Identifier: BSD-3-Clause
// Seeing a worker process end when the host program hides it from
// waitpid: a trainer that ignores SIGCHLD (the kernel reaps children at
// once) or reaps with waitpid(-1) (some launchers) leaves nothing for
// waitpid(pid) to report. A pidfd (Linux >= 5.3) turns readable when its
// process ends, whoever reaps it; without one, a pid that no longer exists
// and is not waitable has ended.
#pragma once

namespace ringloader::trainer {

// A close-on-exec pidfd for `pid`, or -1 (old kernel, seccomp, no syscall).
int open_pidfd(int pid);
// Whether the process ended although waitpid cannot report it. Call only
// after waitpid/waitid for `pid` failed with ECHILD.
bool ended_unseen(int pid, int pidfd);

}  // namespace ringloader::trainer
