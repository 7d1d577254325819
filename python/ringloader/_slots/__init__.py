# SPDX-License-Identifier: BSD-3-Clause
"""Slot formats: what a Python worker writes into a ring slot and the
trainer reads back out of it, so both processes import these modules.

- ``batch_structure``: sample 0's layout of a batch (fields, shapes, dtypes).
- ``batch_writer``: the worker side, samples written into that layout.
- ``collate``: the trainer side, batches rebuilt from it as views.
- ``batch_codec``: the fallback encoding of batches no layout fits.
- ``tensor_rows``: rows of a TensorDataset (and its Subset/Concat views).

May import: the standard library, numpy, torch, ``ringloader._ringloader``
and each other. Never ``ringloader._trainer``, ``ringloader._workers`` or a
public module: a change here changes what both sides read and write, and
nothing else (python/tests/test_import_graph.py checks the direction)."""
