# SPDX-License-Identifier: BSD-3-Clause
"""A hostile *node* (issue 42, item 5): the node's own mapping of its region
stays writable after the seal, so it can rewrite the header a trainer
checked at attach. The trainer copied the header once and uses only the
copy: it keeps working (or gets a NodeError), never a signal. The old
trainer re-read targets_offset, lane_slots and batch_size at every lease
and died of SIGSEGV."""
import ctypes
import json
import time

import pytest

import ringloader
from node_helpers import _name, _dataset, _python, _reference, _node_order

# NodeHeader's fields (loader/node/node_layout.h): offset, ctypes type.
FIELDS = {
    "lane_slots": (16, ctypes.c_uint32),
    "batch_size": (24, ctypes.c_int64),
    "data_bytes": (64, ctypes.c_uint64),
    "channels": (72, ctypes.c_int32),
    "height": (76, ctypes.c_int32),
    "width": (80, ctypes.c_int32),
    "targets_offset": (96, ctypes.c_uint64),
    "indices_offset": (104, ctypes.c_uint64),
}

REWRITES = {
    "targets_offset": {"targets_offset": 1 << 46},
    "indices_offset": {"indices_offset": 1 << 46},
    "lane_slots": {"lane_slots": 0xFFFFFFFF},
    "no_lane_slots": {"lane_slots": 0},
    "batch_size": {"batch_size": 1 << 40},
    # A shape whose product wraps 64 bits to a small size.
    "wrapping_shape": {"channels": 53237, "height": 27211, "width": 759,
                       "batch_size": 16777215,
                       "data_bytes": (53237 * 27211 * 759 * 16777215) % (1 << 64)},
}


def _node_header(name):
    """The node's own (writable, shared) mapping of its region, in this
    process: the test is the node."""
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "rw-s" and f"ringloader-node-{name}" in line:
            return int(fields[0].split("-")[0], 16)
    raise AssertionError("no writable mapping of the node's region")


TRAINER = """
    import json, sys, ringloader
    loader = ringloader.DataLoader(attach="{name}")
    batches = iter(loader)
    first = next(batches)
    got = [[float(first[0].double().sum()), first[1].tolist()]]
    print("attached", flush=True)
    sys.stdin.readline()          # the node rewrites its header now
    error = None
    try:
        images, labels = next(batches)
        got.append([float(images.double().sum()), labels.tolist()])
    except ringloader.NodeError as caught:
        error = str(caught)
    print(json.dumps({{"batches": got, "error": error}}))
"""


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_a_node_that_rewrites_its_header_cannot_crash_a_trainer(image_folder, rewrite):
    """Trainer 1 of two takes its first batch, the node rewrites its header,
    the trainer takes its second (published before the rewrite; lane 0 has
    no trainer, so the node then waits and writes nothing more)."""
    name = _name(f"hostile-node-{rewrite.replace('_', '-')}")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True, seed=7,
                               num_workers=1, trainers=2, name=name, lane_slots=2,
                               epochs=1) as node:
        node.start()
        trainer = _python(TRAINER.format(name=name), LOCAL_RANK=1)
        try:
            assert trainer.stdout.readline().strip() == "attached", trainer.stderr.read()
            time.sleep(0.5)  # the node fills what it can and waits for lane 0
            base = _node_header(name)
            for field, value in REWRITES[rewrite].items():
                offset, kind = FIELDS[field]
                kind.from_address(base + offset).value = value
            out, err = trainer.communicate("go\n", timeout=120)
        finally:
            trainer.kill()
            trainer.wait()
    # Never a signal (SIGSEGV: -11, SIGFPE: -8, SIGBUS: -7).
    assert trainer.returncode == 0, (trainer.returncode, err[-2000:])
    result = json.loads(out.strip().splitlines()[-1])
    if result["error"] is None:  # kept working from its copy: its own batches, whole
        expected = _reference(image_folder, lambda e: _node_order(24, 2, 4, e), 1, 4)[0]
        assert len(result["batches"]) == 2
        for (got_sum, got_labels), (want_sum, want_labels) in zip(result["batches"],
                                                                  expected[1::2]):
            assert got_labels == want_labels
            assert got_sum == pytest.approx(want_sum, rel=1e-6, abs=1e-3)
