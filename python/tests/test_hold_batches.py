# SPDX-License-Identifier: BSD-3-Clause
"""Holding batches never raises by default: a batch still alive when the ring
needs its slot is spilled (copied once out of the ring, its tensors and views
following), as with torch's DataLoader, where kept batches just stay valid."""
import gc
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T

import ringloader


class Records(torch.utils.data.Dataset):
    """Deterministic (tensor, label, dict) samples; the 12 KiB images stay in
    the slot (small fields are copied out), so keeping them holds the slot."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        return torch.full((3, 32, 32), float(i)), i % 5, {"id": i, "half": i / 2.0}


def assert_same(ours, theirs):
    if isinstance(theirs, torch.Tensor):
        assert torch.equal(ours, theirs)
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for key in theirs:
            assert_same(ours[key], theirs[key])
    else:
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)


def native_pair(image_folder, **kwargs):
    transform = T.Compose([T.CenterCrop(8), T.ToTensor()])
    ours = ringloader.DataLoader(ringloader.datasets.ImageFolder(image_folder, transform),
                                 batch_size=4, num_workers=2, ring_slots=2, **kwargs)
    theirs = torch.utils.data.DataLoader(
        torchvision.datasets.ImageFolder(image_folder, transform), batch_size=4)
    return ours, theirs


def test_list_of_native_batches_equals_torch(image_folder):
    ours, theirs = native_pair(image_folder)
    kept = list(ours)  # every batch held: ring_slots=2 alone cannot hold them
    gc.collect()
    assert_same(kept, list(theirs))
    assert ours.stats()["spilled_batches"] > 0


def test_list_of_python_dataset_batches_equals_torch():
    ours = ringloader.DataLoader(Records(), batch_size=4, num_workers=2, ring_slots=2)
    theirs = torch.utils.data.DataLoader(Records(), batch_size=4)
    kept = list(ours)
    assert_same(kept, list(theirs))
    assert ours.stats()["spilled_batches"] > 0


def test_cycle_over_three_epochs(image_folder):
    ours, theirs = native_pair(image_folder)
    expected = list(theirs)
    steps = 3 * len(expected)
    got = list(itertools.islice(itertools.cycle(ours), steps))
    assert_same(got, list(itertools.islice(itertools.cycle(expected), steps)))


def test_views_taken_before_the_spill_follow_it():
    ours = ringloader.DataLoader(Records(), batch_size=4, num_workers=1, ring_slots=2)
    it = iter(ours)
    first = next(it)
    images, ids = first[0][1:3], first[2]["id"]  # views of the raw slot
    expected_images, expected_ids = images.clone(), ids.clone()
    for _ in it:
        pass  # the whole epoch through 2 slots: `first` was spilled
    assert ours.stats()["spilled_batches"] >= 1
    assert torch.equal(images, expected_images)
    assert torch.equal(ids, expected_ids)
    assert torch.equal(first[0][1:3], expected_images)


def test_plain_loop_copies_nothing(image_folder):
    ours, _ = native_pair(image_folder)
    for epoch in range(2):
        for images, labels in ours:
            assert images.shape[0] <= 4
    assert ours.stats()["spilled_batches"] == 0
    python = ringloader.DataLoader(Records(), batch_size=4, num_workers=2, ring_slots=2)
    for _ in python:
        pass
    assert python.stats()["spilled_batches"] == 0


def test_raise_is_still_an_option(image_folder):
    ours, _ = native_pair(image_folder, held_batches="raise")
    with pytest.raises(ringloader.LeaseError):
        list(ours)
    with pytest.raises(ValueError, match="held_batches"):
        native_pair(image_folder, held_batches="keep")


class Arrays(torch.utils.data.Dataset):
    """(ndarray, label) samples whose 4 KiB arrays are not small fields, so
    the trainer side builds them from the ring slot."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return np.full((32, 32), i, dtype=np.float32), i


class RaggedArrays(Arrays):
    """Arrays of other shapes than sample 0's that fit its region (reshaped)."""

    def __getitem__(self, i):
        return np.full((32 - i % 5, 32), i, dtype=np.float32), i


def keep_samples(samples):
    return samples  # a custom collate_fn that keeps what it was given


@pytest.mark.parametrize("dataset", [Arrays(), RaggedArrays()], ids=["arrays", "ragged"])
def test_arrays_a_collate_fn_keeps_keep_their_values(dataset):
    ours = ringloader.DataLoader(dataset, batch_size=2, num_workers=2, ring_slots=2,
                                 collate_fn=keep_samples)
    kept = list(ours)  # 32 batches through 2 slots: most of them spilled
    assert len(kept) == 32
    changed = [i for batch in kept for array, i in batch
               if not (array == np.float32(i)).all()]
    assert changed == []
    assert all(isinstance(array, np.ndarray) and array.shape == dataset[i][0].shape
               for batch in kept for array, i in batch)


ARRAYS_AFTER_THE_LOADER = """
import gc, sys
import numpy as np
sys.path.insert(0, {tests!r})
import ringloader
from test_hold_batches import Arrays, keep_samples
loader = ringloader.DataLoader(Arrays(), batch_size=2, num_workers=2, ring_slots=2,
                               collate_fn=keep_samples)
kept = [batch for n, batch in enumerate(loader) if n < 8]  # the rest dropped
del loader
gc.collect()  # no batch holds a slot any more: nothing keeps the ring mapped
for batch in kept:
    for array, i in batch:
        assert (array == np.float32(i)).all(), (i, array[0, 0])
print("read", sum(len(batch) for batch in kept))
"""


def test_arrays_stay_readable_after_the_loader_is_gone():
    script = ARRAYS_AFTER_THE_LOADER.format(tests=os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read 16" in done.stdout
