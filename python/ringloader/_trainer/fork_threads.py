# SPDX-License-Identifier: BSD-3-Clause
"""Whether the threads of this process, other than the caller, make a fork
unsafe (a lock held by a thread the child loses).

Three kinds do not, each recognised while it is idle:

- The pool of OpenBLAS, which PyPI's numpy bundles and
starts at import (nproc - 1 threads), so a trainer with PyPI's torch (it
imports numpy) is never single-threaded. OpenBLAS shuts its pool down
before a fork (pthread_atfork) and starts it again when next needed, in
parent and child alike. Debian's numpy uses the reference BLAS: no pool.

  A pool thread is recognised by where it waits: in futex() on a word
  inside the OpenBLAS library's own mappings (its condition variable,
  thread_status).
- jemalloc's background purging thread ("jemalloc_bg_thd"), which pyarrow
  (Hugging Face ``datasets``) starts at load. jemalloc takes every one of
  its mutexes in a pthread_atfork handler and resets its background state
  in the child, so a fork never inherits one held. Recognised by its name,
  asleep in futex().
- tqdm's monitor thread (``tqdm._monitor.TMonitor``, started by any
  progress bar, ``datasets.load_dataset``'s among them) while it sleeps in
  ``Event.wait``: it takes tqdm's lock only after that wait returns, and
  the wait's own lock is released while it sleeps (Condition.wait).
  Recognised by its Python frames.

torch's DataLoader forks its workers with all of these running. Any other
thread, or one of these that is busy, counts as unsafe."""
import os
import platform
import sys
import threading

# futex's syscall number, as /proc/<tid>/syscall shows it.
_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())


def _openblas_ranges():
    """[low, high) of each loaded OpenBLAS library, from its first mapping
    to its last (its .bss lies in an unnamed mapping between them)."""
    with open("/proc/self/maps") as maps:
        text = maps.read()
    spans = {}
    for line in _lines_naming(text, "openblas"):
        fields = line.split()
        if len(fields) < 6 or "openblas" not in os.path.basename(fields[5]).lower():
            continue
        low, high = (int(x, 16) for x in fields[0].split("-"))
        old = spans.get(fields[5], (low, high))
        spans[fields[5]] = (min(old[0], low), max(old[1], high))
    return list(spans.values())


def _lines_naming(text, word):
    """The lines of `text` that contain `word`, in any case. Found by
    str.find, not by splitting every line: a process holding torch, pyarrow
    and CUDA's libraries maps over 1,000 (2.9 ms parsed one by one, 1.4 ms
    so, on the way to every IterableDataset loader's first batch)."""
    lowered, at = text.lower(), 0
    while (at := lowered.find(word, at)) >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        at = len(text) if end < 0 else end
        yield text[start:at]


def _waits_in(tid, ranges):
    """The thread sleeps in futex() on a word inside one of ranges."""
    try:
        with open(f"/proc/self/task/{tid}/syscall") as syscall:
            fields = syscall.read().split()
        if int(fields[0]) != _FUTEX:
            return False
        word = int(fields[1], 16)
    except (OSError, ValueError, IndexError):
        return False
    return any(low <= word < high for low, high in ranges)


def _sleeps_in_futex(tid):
    try:
        with open(f"/proc/self/task/{tid}/syscall") as syscall:
            return int(syscall.read().split()[0]) == _FUTEX
    except (OSError, ValueError, IndexError):
        return False


def _jemalloc_idle(tid):
    try:
        with open(f"/proc/self/task/{tid}/comm") as comm:
            name = comm.read().strip()
    except OSError:
        return False
    return name == "jemalloc_bg_thd" and _sleeps_in_futex(tid)


# (module, class, method) of a Python thread's run() that holds no lock
# while it sleeps in Event.wait there.
_IDLE_PYTHON_THREADS = {("tqdm._monitor", "TMonitor", "run")}


def _idle_python_threads():
    """Native ids of Python threads asleep where they hold no lock."""
    frames = sys._current_frames()
    idle = set()
    for thread in threading.enumerate():
        kind = (type(thread).__module__, type(thread).__name__, "run")
        frame = frames.get(thread.ident)
        if kind not in _IDLE_PYTHON_THREADS or frame is None or thread.native_id is None:
            continue
        # Condition.wait <- Event.wait <- the known run(), innermost first.
        chain = []
        while frame is not None and len(chain) < 3:
            chain.append((os.path.basename(frame.f_code.co_filename), frame.f_code.co_name))
            frame = frame.f_back
        if chain[:2] == [("threading.py", "wait")] * 2 and chain[2][1] == "run":
            idle.add(str(thread.native_id))
    return idle


def unsafe_threads():
    """Native ids of the threads besides the caller that could hold a lock
    at a fork (["?"] when /proc cannot tell)."""
    me = str(threading.get_native_id())
    try:
        others = [tid for tid in os.listdir("/proc/self/task") if tid != me]
        if not others or _FUTEX is None:
            return others
        python_idle = _idle_python_threads()
        ranges = _openblas_ranges()
        return [tid for tid in others
                if not (_jemalloc_idle(tid)
                        or (tid in python_idle and _sleeps_in_futex(tid))
                        or (ranges and _waits_in(tid, ranges)))]
    except OSError:
        return ["?"]


def other_threads_unsafe():
    """True when a thread besides the caller could hold a lock at a fork."""
    return bool(unsafe_threads())
