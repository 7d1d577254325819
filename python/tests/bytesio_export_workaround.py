# SPDX-License-Identifier: BSD-3-Clause
"""A workaround, in the test process only, for a CPython bug that torch's
own DataLoader trips in the tests that run it beside ours.

CPython's collector crashes (SIGSEGV in bytesiobuf_releasebuffer, after
"SystemError: deallocated BytesIO object has exported buffers") when a
``BytesIO.getbuffer()`` view is part of a reference cycle
(python/cpython#111049, #111331: CPython 3.12.1, the torch 2.x venv's,
crashes; Debian's 3.11 does not). ``multiprocessing``'s
``ForkingPickler.dumps`` returns such a view, and torch's DataLoader sends
every index message through it (its queues' feeder thread). A core of a
crashed pytest run held the 22-byte view of ``(index, [None, None])``: an
IterableDataset loader of torch's with batch_size=2, from a test that
compares ours with it. The pytest process died now and then, at whatever
test was running when the collector met that cycle.

``dumps`` here returns the same bytes, copied out of the BytesIO: no view
is exported, so no cycle can hold one. Forked workers of torch's loaders
inherit it. Nothing of ringloader's uses ForkingPickler."""
import io
from multiprocessing.reduction import ForkingPickler


def _dumps_without_export(cls, obj, protocol=None):
    buffer = io.BytesIO()
    cls(buffer, protocol).dump(obj)
    return buffer.getvalue()


def apply():
    ForkingPickler.dumps = classmethod(_dumps_without_export)
