# SPDX-License-Identifier: BSD-3-Clause
"""The workaround conftest applies (bytesio_export_workaround.py): the cycle
torch's DataLoader can leave behind is collected without a crash."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

# The message torch's loader puts on an index queue, its dumps() result in
# a reference cycle, collected.
CYCLE = """
import gc, sys
sys.path.insert(0, {here!r})
if {apply}:
    import bytesio_export_workaround
    bytesio_export_workaround.apply()
from multiprocessing.reduction import ForkingPickler
message = ForkingPickler.dumps((0, [None, None]))
cycle = [message]
cycle.append(cycle)
del message, cycle
gc.collect()
print(type(ForkingPickler.dumps(1)).__name__)
"""


def _run(apply):
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c",
                           CYCLE.format(here=HERE, apply=apply)],
                          capture_output=True, text=True, timeout=60)


def test_the_workaround_is_applied_in_this_process():
    from multiprocessing.reduction import ForkingPickler
    assert isinstance(ForkingPickler.dumps((0, [None, None])), bytes)


def test_a_dumped_message_in_a_reference_cycle_is_collected():
    done = _run(apply=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "bytes"
    stock = _run(apply=False)
    if stock.returncode == 0:
        pytest.skip(f"this CPython ({sys.version.split()[0]}) collects the stock "
                    f"view without crashing: the workaround was checked, not needed")
    assert "Segmentation fault" in stock.stderr or stock.returncode < 0, stock.stderr
