# SPDX-License-Identifier: BSD-3-Clause
import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bytesio_export_workaround
from hang_watchdog import pytest_configure as _watchdog_configure
from shards import keep_shard

bytesio_export_workaround.apply()  # torch's loaders in this process: see there

# The build tree's package (ctest sets PYTHONPATH; this helps direct runs).
_BUILD = os.environ.get("RINGLOADER_BUILD_DIR",
                        os.path.join(os.path.dirname(__file__), "..", "..", "build"))
if os.path.isdir(os.path.join(_BUILD, "python")):
    sys.path.insert(0, os.path.join(_BUILD, "python"))


NOBODY = 65534


def pytest_configure(config):
    _watchdog_configure(config)  # names a hung test
    config.addinivalue_line(
        "markers", "cross_user: acts as another user (nobody): needs root, skips without it; "
                   "scripts/test.sh counts those that ran")


def pytest_collection_modifyitems(config, items):
    keep_shard(config, items)  # $RINGLOADER_PYTEST_SHARD
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root to act as another user (nobody)")
        for item in items:
            if item.get_closest_marker("cross_user"):
                item.add_marker(skip)


def pytest_runtest_logreport(report):
    """A cross-user test that ran or skipped: one line in
    $RINGLOADER_CROSS_USER_LOG (set by scripts/test.sh), as the C++ ones
    write (tests/unit/cross_user.h)."""
    log = os.environ.get("RINGLOADER_CROSS_USER_LOG")
    if not log or "cross_user" not in report.keywords:
        return
    if report.when == "call" or (report.when == "setup" and report.skipped):
        with open(log, "a") as f:  # one short write in append mode: lines never interleave
            f.write(f"python {report.nodeid} {'skipped' if report.skipped else 'ran'}\n")


@functools.lru_cache(maxsize=None)
def python_for_nobody(stdlib_only):
    """An interpreter uid 65534 can run: this one where it can (it then
    imports what this one does), else, for code of the standard library
    only, Debian's. None where there is none: a virtual environment in
    root's home (CI's torch 2.x stage) and code that imports torch."""
    for python in (sys.executable, "/usr/bin/python3")[:2 if stdlib_only else 1]:
        try:
            probe = subprocess.run([python, "-S", "-c", "import socket; socket.send_fds"],
                                   user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                                   capture_output=True, timeout=60)
        except OSError:  # EACCES: a folder on its path is closed to nobody
            continue
        if probe.returncode == 0:
            return python
    return None


def write_image_folder(root, classes=3, per_class=8, ext="png", seed=0):
    """root/class_i/NNN.ext with random-sized, random-content RGB images."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    for c in range(classes):
        folder = os.path.join(root, f"class_{c}")
        os.makedirs(folder, exist_ok=True)
        for j in range(per_class):
            h, w = rng.integers(20, 60, size=2)
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, f"{j:03d}.{ext}"))
    return root


def parent_pid(pid):
    """`pid`'s parent, from /proc (the name in parentheses may hold spaces
    and parentheses: the fields after its last ')' are state, ppid...)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def native_worker_children():
    """Pids of this process's ringloader-worker children (native workers
    its loaders spawned), from /proc's parent links."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if parent_pid(entry) == os.getpid() and \
                    "ringloader-worker" in os.readlink(f"/proc/{entry}/exe"):
                pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
    return pids


def write_idx(path, array):
    """An uncompressed ubyte IDX file (MNIST's format) holding `array`."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape)
    with open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def image_folder(tmp_path):
    return write_image_folder(str(tmp_path / "images"))


def run_with_import_log(tmp_path, library, script, args=(), **env_overrides):
    """Runs tmp_path/script.py with tmp_path/<library> importable and
    IMPORT_LOG naming tmp_path/imports.log (the library logs each process
    that imports it there); returns (its stdout's last two lines, the log
    path). Fails the test on a non-zero exit. `env_overrides` set (None:
    unset) environment variables; RINGLOADER_ZYGOTE is unset by default."""
    name, source = library
    (tmp_path / name).write_text(textwrap.dedent(source))
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    log = tmp_path / "imports.log"
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p]
    env = dict(os.environ, IMPORT_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(tmp_path), *paths]))
    env.pop("RINGLOADER_ZYGOTE", None)
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    done = subprocess.run([sys.executable, str(tmp_path / "script.py"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-2:], log


def env_importing_ringloader(extra=None):
    """os.environ plus `extra`, with the folder of the ringloader under test
    first on PYTHONPATH, so a child Python imports that same package (a
    build tree's or the installed one)."""
    import ringloader
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(ringloader.__file__)))
    env = dict(os.environ, **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env
