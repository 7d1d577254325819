# SPDX-License-Identifier: BSD-3-Clause
"""The Python workers' per-batch writer (_batch_writer.py) makes the slot
bytes the general per-sample path (BatchStructure.write) makes, for every
kind of leaf and every way a sample can differ from sample 0; and the
workers' per-sample seeds are torch.manual_seed / random.seed /
np.random.seed of the (seed, epoch, index) key."""
import collections
import random

import numpy as np
import pytest
import torch

from ringloader._slots.batch_structure import BatchStructure
from ringloader._slots.batch_writer import BatchWriter, make_flattener
from ringloader._slots.collate import collate_batch, samples as slot_samples
from ringloader._workers.worker import _Seeder

Point = collections.namedtuple("Point", "x y")


def sample(i):
    return ({"ids": torch.full((5,), i, dtype=torch.int64), "mask": torch.ones(5),
             "name": f"s{i}"},
            np.full((2, 3), i, dtype=np.float32), np.int16(i), i / 2, i % 2 == 0, i,
            Point(torch.tensor([i, i + 1.0]), [i, torch.zeros(0)]))


ODD = {
    2: lambda s: (s[0], s[1], s[2], s[3], s[4], 1 << 70, s[6]),  # int beyond int64
    3: lambda s: (s[0], s[1].astype(np.float64), *s[2:]),  # another dtype
    4: lambda s: ({**s[0], "ids": torch.arange(3)}, *s[1:]),  # fewer elements
    5: lambda s: list(s),  # another container
    6: lambda s: (dict(s[0], extra=1), *s[1:]),  # an extra key
    7: lambda s: (s[0], s[1], s[2], 2.5, s[4], True, s[6]),  # float and bool swapped
    8: lambda s: (s[0], s[1], s[2], np.float64(1.5), *s[4:]),  # numpy float for float
    9: lambda s: (s[0], s[1], s[2], s[3], s[4], s[5], Point(s[6].x.double(), s[6].y)),
}


def fill(structure, batch, general):
    slot = memoryview(bytearray(structure.sample_bytes * 8))
    if general:
        for position, value in enumerate(batch):
            structure.write(slot, 8, position, value, position)
        return slot
    writer = BatchWriter(structure, 8)
    writer.begin(slot, len(batch))
    for position, value in enumerate(batch):
        writer.write(position, value, position)
    writer.finish()
    writer.release()
    return slot


@pytest.mark.parametrize("odd", [None] + sorted(ODD))
def test_writer_makes_the_general_paths_samples(odd):
    batch = [sample(i) for i in range(7)]
    if odd is not None:
        batch[odd % 7] = ODD[odd](batch[odd % 7])
    structure = BatchStructure(sample(0))
    fast, general = (torch.frombuffer(fill(structure, batch, g), dtype=torch.uint8)
                     for g in (False, True))
    expected = slot_samples(structure, general, 8, len(batch))
    got = slot_samples(structure, fast, 8, len(batch))
    assert repr(got) == repr(expected)
    if odd is None:  # every byte of the batch: fixed regions and records
        assert torch.equal(fast[:len(batch) * structure.sample_bytes],
                           general[:len(batch) * structure.sample_bytes])
        assert repr(collate_batch(structure, fast, 8, list(range(7)), "test")) == \
            repr(collate_batch(structure, general, 8, list(range(7)), "test"))


@pytest.mark.parametrize("first", [torch.ones(3), (1, 2.0), {"a": {"b": [1, (2, 3)]}},
                                   [torch.ones(1), {"k": None}], Point(1, 2)])
def test_flattener_gives_the_structures_leaves(first):
    structure = BatchStructure(first)
    flatten = make_flattener(structure.structure)
    assert list(flatten(first)) == structure.leaves(first)
    assert flatten(object()) is None or not isinstance(first, (tuple, list, dict))


def test_seeds_are_those_of_manual_seed_random_seed_and_numpy_seed():
    seeder = _Seeder(7)
    for epoch, index in ((0, 0), (3, 12345), (2, 1 << 40)):
        key = hash((7, epoch, index)) & 0xFFFFFFFF
        torch.manual_seed(key)
        random.seed(key)
        np.random.seed(key)
        expected = (torch.rand(4), random.random(), np.random.rand(3))
        seeder(epoch, index)
        got = (torch.rand(4), random.random(), np.random.rand(3))
        assert torch.equal(got[0], expected[0])
        assert got[1] == expected[1] and np.array_equal(got[2], expected[2])
