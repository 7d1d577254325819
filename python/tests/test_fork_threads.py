# SPDX-License-Identifier: BSD-3-Clause
"""The zygote is forked from a trainer whose only other threads are
OpenBLAS's idle pool (PyPI's numpy starts it at import, so every trainer
with PyPI's torch has it), and spawned when any other thread runs. Workers
forked that way still compute with BLAS, as in the trainer."""
import os
import subprocess
import sys
import textwrap

import pytest

import ringloader

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(ringloader.__file__)))

TRAINER = textwrap.dedent("""
    import os, sys, threading
    import numpy, torch
    pool = len(os.listdir("/proc/self/task")) - 1  # OpenBLAS's, if any
    if sys.argv[1] == "thread":
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    import ringloader
    from ringloader._trainer import python_workers as _python_workers

    class Products(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            a = numpy.arange(160 * 160, dtype=numpy.float64).reshape(160, 160) / (i + 1)
            return torch.from_numpy(a @ a.T)

    got = torch.cat(list(ringloader.DataLoader(Products(), batch_size=2, num_workers=2)))
    want = torch.stack([Products()[i] for i in range(6)])
    assert torch.equal(got, want)
    zygote = _python_workers._zygote_process
    print("POOL", pool, "FORKED" if zygote.pid is not None else "SPAWNED")
""")


def _zygote_of(kind):
    env = dict(os.environ, RINGLOADER_ZYGOTE="", PYTHONPATH=os.pathsep.join(
        p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", TRAINER, kind], env=env,
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
