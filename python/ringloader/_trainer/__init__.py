# SPDX-License-Identifier: BSD-3-Clause
"""What runs in the trainer process behind the public DataLoader: choosing
a backend and reading its arguments, the iterators that hand batches out,
the saved position, streams and distributed setup, devices, and starting
the Python workers' loader server.

- ``arguments``, ``options``: torch's DataLoader arguments -> a backend.
- ``backend``, ``ring``, ``in_process``, ``torch_fallback``: the backends
  (native ring, the trainer itself at num_workers=0, torch's own loader).
- ``iterator``, ``iterable``, ``batches``, ``stream``: batches out of the
  ring for map-style and iterable datasets.
- ``state``, ``reconfigure``: state_dict and attributes set after
  construction.
- ``seeding``, ``worker_batching``: how Python workers are seeded
  (``seeding=``) and make batches (collate_fn).
- ``distributed``, ``device``: rank, world size and the target device.
- ``python_workers``, ``fork_threads``: starting the zygote the Python
  workers are forked from (``ringloader._workers``).

May import: anything in the package. Nothing outside the trainer imports
this package but the public modules (dataloader, node, attached, the
package's __init__); the workers and the slot formats never do
(python/tests/test_import_graph.py checks the direction)."""
