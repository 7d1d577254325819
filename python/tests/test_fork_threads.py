# SPDX-License-Identifier: BSD-3-Clause
"""The zygote is forked from a trainer whose only other threads are
OpenBLAS's idle pool (PyPI's numpy starts it at import, so every trainer
with PyPI's torch has it), and spawned when any other thread runs. Workers
forked that way still compute with BLAS, as in the trainer.

Two more threads leave the trainer forkable while asleep, as torch's forked
workers assume: jemalloc's background thread (pyarrow) and tqdm's monitor
(datasets.load_dataset's progress bars); busy, they do not. With both
asleep, a Hugging Face map-style loader forks its server from the trainer
instead of importing ``datasets`` again (issue 46 item 4: first batch
2.69 s -> 0.21 s beside torch's 0.16 s, bench/clients.py)."""
import ctypes
import hashlib
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import env_importing_ringloader
from ringloader._trainer import fork_threads


TRAINER = textwrap.dedent("""
    import os, sys, threading
    import numpy, torch
    pool = len(os.listdir("/proc/self/task")) - 1  # OpenBLAS's, if any
    if sys.argv[1] == "thread":
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    import ringloader
    from ringloader._trainer import zygote_process as _zygote_process

    class Products(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            a = numpy.arange(160 * 160, dtype=numpy.float64).reshape(160, 160) / (i + 1)
            return torch.from_numpy(a @ a.T)

    got = torch.cat(list(ringloader.DataLoader(Products(), batch_size=2, num_workers=2)))
    want = torch.stack([Products()[i] for i in range(6)])
    assert torch.equal(got, want)
    zygote = _zygote_process._zygote_process
    print("POOL", pool, "FORKED" if zygote.pid is not None else "SPAWNED")
""")


def _zygote_of(kind):
    result = subprocess.run([sys.executable, "-c", TRAINER, kind],
                            env=env_importing_ringloader({"RINGLOADER_ZYGOTE": ""}),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    _, pool, how = result.stdout.split()
    return int(pool), how


def test_openblas_pool_leaves_the_zygote_forked():
    pool, how = _zygote_of("plain")
    if pool == 0:
        pytest.skip("numpy here starts no BLAS threads (Debian's reference BLAS)")
    # Before: SPAWNED under torch 2.14 / numpy 2.5 from PyPI (one pool thread).
    assert how == "FORKED", pool


def test_any_other_thread_gets_a_spawned_zygote():
    _, how = _zygote_of("thread")
    assert how == "SPAWNED"


_PR_SET_NAME = 15


def _named(name):
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_NAME, name.encode(), 0, 0, 0) == 0


class _Thread(threading.Thread):
    """Runs `body(stop)` on a thread named `comm` (as /proc shows it)."""

    def __init__(self, comm, body):
        super().__init__(daemon=True)
        self.comm, self.body = comm, body
        self.stop, self.started_ = threading.Event(), threading.Event()

    def run(self):
        _named(self.comm)
        self.started_.set()
        self.body(self.stop)

    def __enter__(self):
        self.start()
        self.started_.wait()
        time.sleep(0.2)  # asleep (or spinning) by now
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join()


def _sleep(stop):
    stop.wait()


def _spin(stop):
    # Native work without the GIL: a Python loop would mostly wait for the
    # GIL, in futex(), which is what an idle thread looks like.
    block = bytes(1 << 22)
    while not stop.is_set():
        hashlib.sha256(block).digest()


def _unsafe(thread):
    """Whether `thread` counts (other threads of the suite may run too)."""
    return str(thread.native_id) in fork_threads.unsafe_threads()


def test_an_idle_jemalloc_background_thread_is_safe():
    with _Thread("jemalloc_bg_thd", _sleep) as thread:
        assert not _unsafe(thread)


def test_a_busy_jemalloc_thread_or_an_unknown_idle_one_is_not():
    with _Thread("jemalloc_bg_thd", _spin) as thread:
        # Between two hashes it takes the GIL (a futex wait): sampled often,
        # it is seen busy.
        assert any(_unsafe(thread) for _ in range(50))
    with _Thread("worker", _sleep) as thread:
        assert _unsafe(thread)
        assert fork_threads.other_threads_unsafe()


def _monitor_class(module):
    """tqdm's TMonitor as tqdm 4.x writes it: waits, then takes the lock."""
    class TMonitor(threading.Thread):
        def __init__(self):
            super().__init__(daemon=True)
            self.was_killed = threading.Event()
            self.lock = threading.Lock()
            self.busy = False

        def run(self):
            while not self.was_killed.is_set():
                if self.busy:
                    with self.lock:
                        while self.busy and not self.was_killed.is_set():
                            pass
                self.was_killed.wait(0.05)
    TMonitor.__module__ = module
    return TMonitor


@pytest.mark.parametrize("module, safe", [("tqdm._monitor", True), ("mylib.monitor", False)])
def test_tqdms_monitor_asleep_in_its_wait_is_safe(module, safe):
    monitor = _monitor_class(module)()
    monitor.start()
    try:
        time.sleep(0.3)
        # Asleep in Event.wait, not between two waits: sampled until seen
        # (up to 2 s: on 2 loaded cores its wake-ups wait for a core, and
        # 20 samples in 0.2 s once all fell between waits).
        for _ in range(200):
            if _unsafe(monitor) != safe:
                break
            time.sleep(0.01)
        assert _unsafe(monitor) != safe
        monitor.busy = True  # holds its lock: never safe
        time.sleep(0.2)
        assert _unsafe(monitor)
    finally:
        monitor.was_killed.set()
        monitor.busy = False
        monitor.join()


def test_the_real_tqdm_monitor_is_recognised():
    tqdm = pytest.importorskip("tqdm")
    bar = tqdm.tqdm(total=1, mininterval=0, miniters=1, disable=False, file=sys.stderr)
    try:
        monitor = bar.monitor
        if monitor is None:
            pytest.skip("tqdm started no monitor thread")
        time.sleep(0.2)
        assert not _unsafe(monitor)
    finally:
        bar.close()  # the last bar: tqdm ends its monitor


def test_the_lines_naming_openblas_are_found_once_each_in_any_case():
    maps = ("7f00-7f10 r--p 0 08:01 1 /opt/openblas/libopenblas.so.0\n"
            "7f10-7f20 rw-p 0 00:00 0 \n"
            "7f20-7f30 r-xp 0 08:01 2 /usr/lib/libtorch.so\n"
            "7f30-7f40 r--p 0 08:01 3 /site/numpy.libs/libscipy_OpenBLAS64_-ab.so")
    assert list(fork_threads._lines_naming(maps, "openblas")) == [
        maps.splitlines()[0], maps.splitlines()[3]]
    assert list(fork_threads._lines_naming("", "openblas")) == []
