# SPDX-License-Identifier: BSD-3-Clause
"""What runs in the Python worker processes: the loader server (zygote) the
trainer starts once, the gate of the stubs the C++ WorkerPool spawns and
waits on, and the workers the server forks from itself with the dataset
already loaded.

- ``zygote``: the loader server; forks one worker per stub it admits.
- ``stub_gate``: the server's checks of a stub; the stub itself, with its
  checks of the server, is C++ (loader/worker/python_stub_main.cc).
- ``worker``: a map-style worker, batches into ring slots.
- ``torch_seeding``: a worker seeded as torch's (``seeding="torch"``).
- ``iterable_worker``: an IterableDataset worker, chunks into ring slots.

May import: the standard library, numpy, torch, ``ringloader._ringloader``,
``ringloader._exceptions`` (the errors both sides map), ``ringloader._slots``
and each other. Never trainer code (``ringloader._trainer``, the DataLoader
and the other public modules): a worker holds only what the fork gave it
(python/tests/test_import_graph.py checks the direction)."""
