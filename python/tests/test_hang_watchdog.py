# SPDX-License-Identifier: BSD-3-Clause
"""The suite's hang watchdog (hang_watchdog.py) names a hung test, shows
where it waits and ends the run, so CI fails in minutes with a reason."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a_hung_test_is_named_shown_and_killed(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from hang_watchdog import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_sleeps.py").write_text(
        "import time\n\n"
        "def test_quick():\n    pass\n\n"
        "def test_sleeps_forever():\n    time.sleep(3600)\n")
    env = dict(os.environ, RINGLOADER_TEST_HANG_S="2",
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == -9, out  # SIGKILL: the run ends, not at CI's limit
    assert time.monotonic() - start < 90, out
    assert "test_sleeps.py::test_sleeps_forever still running after 2 s" in out, out
    assert 'line 7 in test_sleeps_forever' in out, out  # its Python stack
    assert "--- native stacks of pid" in out and "state S" in out, out
