# SPDX-License-Identifier: BSD-3-Clause
"""A test that hangs is named, its stacks shown, and the run ended.

CI once saw the suite stop inside one test until ctest killed it 15 minutes
later, with nothing to say which test or where. This plugin hands each
test's start to a watchdog process; a test still running after
RINGLOADER_TEST_HANG_S seconds (default 300) gets:
  - its name;
  - the Python stacks of every thread of the pytest process (faulthandler,
    on SIGUSR1);
  - the native stacks (gdb, where installed) of pytest and each process
    below it: zygote, workers;
then pytest is killed, so the run fails in minutes, not at CI's limit.

Why a process, not faulthandler.dump_traceback_later: that starts a thread
in the trainer, and a trainer with other threads takes another route to
its workers (_fork_threads.py), so every test would run off the default.
Why a grandchild: tests count and wait for the trainer's own children."""
import faulthandler
import os
import select
import signal
import subprocess
import sys
import time

import pytest

_DEFAULT_LIMIT_S = 300
_MAX_TRACED = 12  # processes gdb attaches to: the trainer, zygote, workers
_POLL_S = 10  # how often an idle watchdog checks that pytest still lives


class _Plugin:
    def __init__(self, limit_s):
        self._stderr = os.fdopen(os.dup(2), "w")  # capture is off at configure
        faulthandler.register(signal.SIGUSR1, file=self._stderr, all_threads=True)
        read_end, self._beats = os.pipe()
        subprocess.run([sys.executable, __file__, "--daemon", str(os.getpid()),
                        str(read_end), str(limit_s)],
                       pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                       stdout=self._stderr, stderr=self._stderr, check=True)
        os.close(read_end)

    def pytest_unconfigure(self):
        faulthandler.unregister(signal.SIGUSR1)
        os.close(self._beats)
        self._stderr.close()

    def _say(self, line):
        os.write(self._beats, (line.replace("\n", " ") + "\n").encode())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item):
        self._say("start " + item.nodeid)
        yield
        self._say("end")


def pytest_configure(config):
    limit_s = float(os.environ.get("RINGLOADER_TEST_HANG_S", _DEFAULT_LIMIT_S))
    if limit_s > 0:
        config.pluginmanager.register(_Plugin(limit_s), "ringloader_hang_watchdog")


def _descendants(root):
    """root and the processes below it, parents first (the kernel's
    per-thread children lists)."""
    order, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as children:
                    queue.extend(int(child) for child in children.read().split())
        except OSError:
            continue  # ended meanwhile
    return order


def _state(pid):
    """The process's state letter and kernel wait channel: a 'T' (stopped)
    process shows no Python stack, as SIGUSR1 waits for it to go on."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as wchan:
            return f"state {state}, wchan {wchan.read() or '-'}"
    except (OSError, IndexError):
        return "state unknown"


def _native_stacks(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            name = cmdline.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        name = f"{name}({_state(pid)})"
        gdb = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx",
                              "-ex", "thread apply all bt 30"],
                             capture_output=True, text=True, timeout=90)
        lines = [l for l in gdb.stdout.splitlines() if l.startswith(("#", "Thread"))]
        # No frames: say why (ptrace refused, the process gone).
        lines = lines or (gdb.stdout + gdb.stderr).splitlines()[-3:]
    except (OSError, subprocess.TimeoutExpired) as e:
        lines = [f"(no native stacks: {e})"]
    print(f"--- native stacks of pid {pid}: {name}", *lines, sep="\n", flush=True)


def _report_and_kill(pytest_pid, test, ran_s):
    print(f"\n=== hang watchdog: {test} still running after {ran_s:.0f} s;"
          " Python stacks of pytest, native stacks below, then pytest is killed",
          flush=True)
    try:
        os.kill(pytest_pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(3)
    for pid in _descendants(pytest_pid)[:_MAX_TRACED]:
        _native_stacks(pid)
    try:
        os.kill(pytest_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _watch(pytest_pid, beats_fd, limit_s):
    """Forked children of pytest (the zygote) share the pipe's write end, so
    its end-of-file alone does not say that pytest is gone."""
    test, started, pending = None, 0.0, b""
    while True:
        left = _POLL_S if test is None else started + limit_s - time.monotonic()
        if test is not None and left <= 0:
            _report_and_kill(pytest_pid, test, time.monotonic() - started)
            return
        readable, _, _ = select.select([beats_fd], [], [], min(left, _POLL_S))
        if not readable:
            try:
                os.kill(pytest_pid, 0)
            except ProcessLookupError:
                return
            continue
        chunk = os.read(beats_fd, 4096)
        if not chunk:
            return  # pytest ended
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"start "):
                test, started = line[6:].decode(errors="replace"), time.monotonic()
            else:
                test = None


def _daemon(pytest_pid, beats_fd, limit_s):
    """Detaches twice, so the watchdog is nobody's child in the suite."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.chdir("/")
    _watch(pytest_pid, beats_fd, limit_s)
    os._exit(0)


if __name__ == "__main__" and sys.argv[1:2] == ["--daemon"]:
    _daemon(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
