# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader(seeding="torch") (issue 46 item 3): Python workers seeded as
torch seeds them (base seed drawn from the default RNG at iter(), each
worker base_seed + id for torch and random and torch's numpy state, the
user's worker_init_fn after) and batches dealt round-robin, so that an
augmented torchvision run gives torch's batches line for line. The default
(per-sample streams) does not."""
import functools
import os
import random
import time

import numpy as np
import pytest
import torch
from torch.utils.data._utils.collate import default_collate

import ringloader

datasets = pytest.importorskip("torchvision.datasets")
transforms = pytest.importorskip("torchvision.transforms")
Image = pytest.importorskip("PIL.Image")

CLASSES, PER_CLASS = 2, 10  # 20 images, batches of 4: 5 a epoch, an odd count


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeding")
    rng = np.random.default_rng(46)
    for label in range(CLASSES):
        (root / f"c{label}").mkdir()
        for i in range(PER_CLASS):
            pixels = rng.integers(0, 256, size=(40, 48, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"c{label}" / f"{i}.png")
    return str(root)


def _augmented(root):
    """An ImageFolder whose transforms ringloader's native converter takes
    over by default (it does not with seeding="torch")."""
    return datasets.ImageFolder(root, transform=transforms.Compose([
        transforms.RandomResizedCrop(24), transforms.ColorJitter(0.4, 0.4, 0.4),
        transforms.ToTensor(), transforms.RandomErasing(p=0.5)]))


def _draw_per_worker(worker_id):
    """A worker_init_fn that moves torch's RNG by a worker's own amount: it
    must run once per worker, with its id, after the worker's seeding."""
    torch.rand(worker_id + 1)


def _collate_with_draws(batch):
    """Runs in the workers, as torch's: draws from random and numpy."""
    return default_collate(batch) + [torch.tensor([random.random(), np.random.rand()])]


def _epochs(loader_class, root, persistent, epochs=2, **extra):
    torch.manual_seed(1234)
    loader = loader_class(_augmented(root), batch_size=4, shuffle=True, num_workers=2,
                          persistent_workers=persistent, worker_init_fn=_draw_per_worker,
                          collate_fn=_collate_with_draws, **extra)
    batches = [[t.clone() for t in batch] for _ in range(epochs) for batch in loader]
    return batches, torch.rand(4)  # the trainer's RNG after: the same draws made


def _equal(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y))
        for x, y in zip(a, b))


@pytest.mark.parametrize("persistent", [False, True])
def test_augmented_batches_equal_torchs(folder, persistent):
    theirs, their_rng = _epochs(torch.utils.data.DataLoader, folder, persistent)
    ours, our_rng = _epochs(ringloader.DataLoader, folder, persistent, seeding="torch")
    assert len(theirs) == 10
    assert _equal(ours, theirs)
    assert torch.equal(our_rng, their_rng)


def test_default_seeding_differs_from_torchs(folder):
    """The test above can fail: ringloader's per-sample streams give other
    augmentations."""
    theirs, _ = _epochs(torch.utils.data.DataLoader, folder, False, epochs=1)
    ours, _ = _epochs(ringloader.DataLoader, folder, False, epochs=1)
    assert [b[1].tolist() for b in ours] == [b[1].tolist() for b in theirs]  # same order
    assert not _equal(ours, theirs)


def test_torch_seeding_keeps_python_workers_and_refuses_seed(folder):
    loader = ringloader.DataLoader(_augmented(folder), batch_size=4, num_workers=2,
                                   seeding="torch")
    assert loader._converted is None  # not taken over by the C++ workers
    with pytest.raises(ValueError, match="seeding"):
        ringloader.DataLoader(_augmented(folder), num_workers=2, seeding="torch", seed=3)
    with pytest.raises(ValueError, match="seeding must be"):
        ringloader.DataLoader(_augmented(folder), num_workers=2, seeding="numpy")


def _record_seeds(folder, worker_id):
    """worker_init_fn: writes what this worker sees (every worker runs it,
    whether or not it gets a batch)."""
    info = torch.utils.data.get_worker_info()
    name = f"{worker_id}-{os.getpid()}"
    # Written whole, then renamed: the trainer polls the folder and must never
    # read a file that has been created but not yet written.
    with open(os.path.join(folder, "." + name), "w") as out:
        out.write(f"{worker_id} {torch.initial_seed()} {info.seed}")
    os.replace(os.path.join(folder, "." + name), os.path.join(folder, name))


def _written(folder):
    return [name for name in os.listdir(folder) if not name.startswith(".")]


def _seeds_seen(folder, loader):
    """What each of the loader's 2 workers saw: its workers live while an
    iterator does (persistent), so each runs worker_init_fn in time."""
    iterator = iter(loader)
    next(iterator)
    deadline = time.monotonic() + 60
    while len(_written(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    rows = []
    for name in _written(folder):
        with open(os.path.join(folder, name)) as seen:
            rows.append(tuple(int(x) for x in seen.read().split()))
        os.remove(os.path.join(folder, name))
    return sorted(rows)


@pytest.mark.parametrize("seeding", ["ringloader", "torch"])
def test_worker_init_fn_sees_torchs_worker_seed_after_the_trainer_seeded(seeding, tmp_path):
    """What Lightning's pl_worker_init_function reads: the base seed is
    torch.initial_seed() - worker_id, as in torch's workers. Before, a
    trainer seeded with 0 (seed_everything(0)) gave workers forked from it
    initial_seed() 0, a base seed of -1 for worker 1, and numpy's
    SeedSequence refused it: the worker died before it started."""
    record = functools.partial(_record_seeds, str(tmp_path))
    data = torch.utils.data.TensorDataset(torch.arange(8))
    torch.manual_seed(0)
    ours = _seeds_seen(tmp_path, ringloader.DataLoader(
        data, batch_size=2, num_workers=2, worker_init_fn=record, seeding=seeding,
        persistent_workers=True))
    torch.manual_seed(0)
    reference = _seeds_seen(tmp_path, torch.utils.data.DataLoader(
        data, batch_size=2, num_workers=2, worker_init_fn=record, persistent_workers=True))
    for seen in (ours, reference):
        assert [worker for worker, _, _ in seen] == [0, 1]
        for worker, initial, seed in seen:
            assert initial == seed and initial - worker >= 0
    if seeding == "torch":  # the base seed drawn from the trainer's generator
        assert ours == reference
