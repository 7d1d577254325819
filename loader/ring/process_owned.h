// SPDX-License-Identifier: BSD-3-Clause
// Objects that own threads or child processes, seen from a fork child of
// the process that made them.
//
// fork() copies the memory of every thread but runs only the caller. A
// child that destroys its copy of such an object (its exit, its garbage
// collector) would:
//   - join threads it does not have: glibc hands the missing threads'
//     stacks back to its cache in the child, so std::thread::join reads
//     freed memory (SIGSEGV, seen in CI under torch 2.x);
//   - destroy condition variables with waiters that never wake (a hang);
//   - SIGTERM and reap the parent's shard commands (the parent's epoch
//     fails or fetches again).
// The copy is the parent's: the child leaks it. That costs the child
// nothing (copy-on-write pages it already has, freed at its exit); the
// parent, which made the object, destroys it as usual.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <utility>

namespace ringloader::ring {

// The process that made an object. Read-only after construction; any thread.
class MakingProcess {
 public:
  bool here() const { return getpid() == pid_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = getpid();
};

// A deleter that destroys only in the making process (above).
template <class T>
struct DeleteInMakingProcess {
  MakingProcess maker;
  void operator()(T* object) const noexcept {
    if (maker.here()) delete object;
  }
};

// std::make_shared for objects that own threads or child processes.
template <class T, class... Args>
std::shared_ptr<T> make_shared_process_owned(Args&&... args) {
  return std::shared_ptr<T>(new T(std::forward<Args>(args)...), DeleteInMakingProcess<T>{});
}

}  // namespace ringloader::ring
