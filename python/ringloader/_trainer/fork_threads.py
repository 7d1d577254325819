# SPDX-License-Identifier: BSD-3-Clause
"""Whether the threads of this process, other than the caller, make a fork
unsafe (a lock held by a thread the child loses).

One kind does not: the pool of OpenBLAS, which PyPI's numpy bundles and
starts at import (nproc - 1 threads), so a trainer with PyPI's torch (it
imports numpy) is never single-threaded. OpenBLAS shuts its pool down
before a fork (pthread_atfork) and starts it again when next needed, in
parent and child alike. Debian's numpy uses the reference BLAS: no pool.

A pool thread is recognised by where it waits: in futex() on a word inside
the OpenBLAS library's own mappings (its condition variable, thread_status).
Any other thread, or a pool thread that is busy, counts as unsafe."""
import os
import platform
import threading

# futex's syscall number, as /proc/<tid>/syscall shows it.
_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())


def _openblas_ranges():
    """[low, high) of each loaded OpenBLAS library, from its first mapping
    to its last (its .bss lies in an unnamed mapping between them)."""
    spans = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or "openblas" not in os.path.basename(fields[5]).lower():
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            old = spans.get(fields[5], (low, high))
            spans[fields[5]] = (min(old[0], low), max(old[1], high))
    return list(spans.values())


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


def other_threads_unsafe():
    """True when a thread besides the caller could hold a lock at a fork."""
    me = str(threading.get_native_id())
    try:
        others = [tid for tid in os.listdir("/proc/self/task") if tid != me]
        if not others:
            return False
        if _FUTEX is None:
            return True
        ranges = _openblas_ranges()
    except OSError:
        return True
    return not ranges or not all(_waits_in(tid, ranges) for tid in others)
