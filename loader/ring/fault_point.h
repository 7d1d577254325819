// SPDX-License-Identifier: BSD-3-Clause
// Fault-injection points for the test suite: named places in the ring
// protocol where a test can run code (in-process, set_hook) or have the
// process SIGKILL itself (spawned workers, $RINGLOADER_FAULT_KILL_AT), to
// hit a race window deterministically instead of by luck.
//
// Compiled in only with -DRINGLOADER_FAULT_INJECTION=ON (the default when
// the test suite is built); otherwise RINGLOADER_FAULT_POINT expands to
// nothing and compiled_in() is false.
//
//   RINGLOADER_FAULT_KILL_AT=<point>:<marker file>
//     the first process that reaches <point> and creates <marker file>
//     (O_EXCL) kills itself with SIGKILL; every later one goes on, so a
//     replacement worker is not killed again.
//   RINGLOADER_FAULT_SIGNAL_AT=<point>:<signal number>:<marker file>
//     the same, but raise()s that signal (to the calling thread): e.g. SIGINT
//     in the trainer, a Ctrl-C that lands at exactly that point.
#pragma once

namespace ringloader::fault {

using Hook = void (*)(const char* point);
// In-process hook, called at every point reached (null: none). Not
// thread-safe to change while points run; set it before, clear it after.
void set_hook(Hook hook);
bool compiled_in();
// Runs the hook and the kill request for `point` (see above).
void reached(const char* point);

}  // namespace ringloader::fault

#ifdef RINGLOADER_FAULT_INJECTION
#define RINGLOADER_FAULT_POINT(name) ::ringloader::fault::reached(name)
#else
#define RINGLOADER_FAULT_POINT(name) \
  do {                               \
  } while (0)
#endif
