# SPDX-License-Identifier: BSD-3-Clause
"""Runs one shard of the suite: $RINGLOADER_PYTEST_SHARD="k/n" keeps the
test files dealt to shard k (1-based) of n, so n pytest processes run the
whole suite side by side (ctest's pytest_1, pytest_2; the torch 2.x
stage's two halves).

Most tests wait on worker processes starting and exiting, so one pytest
process leaves a core idle. Files are dealt by their measured seconds
(file_seconds.json: Debian's torch 1.13 on 2 cores, `pytest --durations=0`
summed per file), longest first, each to the shard with the least time so
far; a file the table lacks counts _UNKNOWN_S. Dealing by file size,
before, gave halves of 406 and 241 s. Every shard collects the same files,
so they deal them alike: no file runs twice or never."""
import json
import os

_UNKNOWN_S = 10.0
_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_seconds.json")


def _shard():
    value = os.environ.get("RINGLOADER_PYTEST_SHARD", "")
    if not value:
        return None
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise ValueError(f"$RINGLOADER_PYTEST_SHARD must be k/n with 1 <= k <= n, "
                         f"got {value!r}")
    return index, count


def deal(files, count, seconds):
    """{file: shard (1-based)}: longest first, each to the least loaded."""
    loads = [0.0] * count
    shard_of = {}
    for name in sorted(files, key=lambda f: (-seconds.get(f, _UNKNOWN_S), f)):
        shard = min(range(count), key=lambda s: (loads[s], s))
        loads[shard] += seconds.get(name, _UNKNOWN_S)
        shard_of[name] = shard + 1
    return shard_of


def keep_shard(config, items):
    """Deselects the items of the other shards (pytest_collection_modifyitems)."""
    shard = _shard()
    if shard is None:
        return
    index, count = shard
    with open(_TABLE) as table:
        seconds = json.load(table)
    shard_of = deal({os.path.basename(str(item.fspath)) for item in items}, count, seconds)
    kept, dropped = [], []
    for item in items:
        (kept if shard_of[os.path.basename(str(item.fspath))] == index else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
