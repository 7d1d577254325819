# SPDX-License-Identifier: BSD-3-Clause
"""Holding batches never raises by default: a batch still alive when the ring
needs its slot is spilled (copied once out of the ring, its tensors and views
following), as with torch's DataLoader, where kept batches just stay valid."""
import gc
import itertools

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
