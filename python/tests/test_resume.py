# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader.state_dict() / load_state_dict(): a loader stopped between any
two batches plus a fresh loader restored from its state (through torch.save)
deliver exactly the bytes of one uninterrupted run."""
import io

import pytest
import torch

import ringloader
from ringloader import transforms as T

EPOCHS = 3
BATCH = 5  # 24 samples: 5 batches, the last of 4


class NoisyDataset(torch.utils.data.Dataset):
    """A Python dataset with random augmentation (torch's global RNG)."""

    def __len__(self):
        return 24

    def __getitem__(self, index):
        return torch.full((3,), float(index)) + torch.rand(3), index


class PlainDataset(NoisyDataset):
    def __getitem__(self, index):
        return torch.full((3,), float(index)), index


def augmented(image_folder):
    return ringloader.datasets.ImageFolder(image_folder, T.Compose([
        T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor()]))


def through_torch_save(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def batches(loader, limit=None):
    out = []
    for x, y in loader:
        out.append((x.clone(), y.clone()))
        if limit is not None and len(out) == limit:
            break
    return out


def interrupted_run(make, workers_before, workers_after, cut, finish=False):
    """Epoch 0 whole, `cut` batches of epoch 1 (all of it with `finish`),
    then a fresh loader from the state until EPOCHS epochs are done."""
    first = make(workers_before)
    seen = batches(first)
    iterator = iter(first)
    for _ in range(cut):
        x, y = next(iterator)
        seen.append((x.clone(), y.clone()))
    if finish:
        seen += batches(iterator)
    state = through_torch_save(first.state_dict())
    del iterator, first
    second = make(workers_after)
    second.load_state_dict(state)
    for _ in range(EPOCHS):
        if len(seen) >= EPOCHS * 5:
            break
        seen += batches(second)
    return seen, state


def assert_same(got, want):
    assert len(got) == len(want)
    for i, ((x, y), (wx, wy)) in enumerate(zip(got, want)):
        assert torch.equal(y, wy), f"batch {i}: other samples"
        assert torch.equal(x, wx), f"batch {i}: other bytes"


@pytest.mark.parametrize("cut,finish", [(0, False), (2, False), (4, False),
                                        (5, False), (5, True)])
def test_native_resume_at_every_cut_point(image_folder, cut, finish):
    def make(workers):
        return ringloader.DataLoader(augmented(image_folder), batch_size=BATCH,
                                     shuffle=True, num_workers=workers, seed=9,
                                     generator=torch.Generator().manual_seed(4))
    reference = []
    loader = make(2)
    for _ in range(EPOCHS):
        reference += batches(loader)
    seen, state = interrupted_run(make, 2, 0, cut, finish)
    # A torch sampler's order travels in the state while its epoch runs.
    assert (state["order"] is not None) == (not finish)
    assert (state["epoch"], state["batches_consumed"]) == ((2, 0) if finish else (1, cut))
    assert_same(seen, reference)


def test_distributed_shuffle_resumes_without_storing_the_order(image_folder):
    def make(workers):
        return ringloader.DataLoader(augmented(image_folder), batch_size=BATCH // 2,
                                     shuffle=True, num_workers=workers,
                                     distributed=True, rank=1, world_size=2)
    reference = []
    loader = make(1)
    for _ in range(EPOCHS):
        reference += batches(loader)
    assert len(reference) == EPOCHS * 6
    first = make(1)
    seen = batches(first) + batches(first, limit=3)
    state = through_torch_save(first.state_dict())
    assert state["order"] is None, "ringloader's own order is recomputed"
    second = make(0)
    second.load_state_dict(state)
    for _ in range(2):
        seen += batches(second)
    assert_same(seen, reference)


@pytest.mark.parametrize("workers", [0, 1])
def test_python_dataset_resume(workers):
    # Spawned Python workers reseed per sample, so even torch.rand noise is
    # reproduced; in process (torch's semantics) the global RNG draws it, so
    # there the dataset is deterministic.
    dataset = NoisyDataset() if workers else PlainDataset()

    def make(_):
        return ringloader.DataLoader(dataset, batch_size=BATCH, shuffle=True,
                                     num_workers=workers, seed=2,
                                     generator=torch.Generator().manual_seed(8))
    reference = []
    loader = make(workers)
    for _ in range(EPOCHS):
        reference += batches(loader)
    del loader
    seen, state = interrupted_run(make, workers, workers, 2)
    assert_same(seen, reference)


def test_another_configuration_is_refused(image_folder):
    dataset = augmented(image_folder)
    loader = ringloader.DataLoader(dataset, batch_size=BATCH, shuffle=True, seed=1)
    next(iter(loader))
    state = loader.state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        ringloader.DataLoader(dataset, batch_size=4, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        ringloader.DataLoader(dataset, batch_size=BATCH, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="kind"):
        ringloader.DataLoader(PlainDataset(), batch_size=BATCH,
                              seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="version"):
        ringloader.DataLoader(dataset, batch_size=BATCH,
                              seed=1).load_state_dict({"version": 0})


def test_state_between_epochs_and_set_epoch(image_folder):
    def make():
        return ringloader.DataLoader(augmented(image_folder), batch_size=BATCH,
                                     shuffle=True, seed=3,
                                     generator=torch.Generator().manual_seed(1))
    loader = make()
    assert loader.state_dict()["epoch"] == 0
    epoch0 = batches(loader)
    assert loader.state_dict()["epoch"] == 1
    loader.set_epoch(7)
    assert loader.state_dict()["epoch"] == 7
    # A training loop that calls set_epoch(its own epoch) after loading.
    first = make()
    seen = batches(first, limit=2)
    state = first.state_dict()
    second = make()
    second.load_state_dict(state)
    second.set_epoch(0)
    assert_same(seen + batches(second), epoch0)
