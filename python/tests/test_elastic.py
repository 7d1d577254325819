# SPDX-License-Identifier: BSD-3-Clause
"""Elastic resume across real processes (torch.distributed, gloo): a job of
world size W saves mid-epoch, a job of W' restores the states and finishes
the epoch. Every sample of the interrupted epoch is delivered exactly once
(padding aside), all ranks get equal batch counts, and the next epoch is
the one a job always run at W' draws. Image folders, tar shards, and a
Python dataset (in Python workers and in process)."""
import collections
import io
import os
import tarfile


import pytest
import torch

import ringloader
from conftest import write_image_folder
from test_distributed import run_gloo_job

RANK_SCRIPT = os.path.join(os.path.dirname(__file__), "elastic_rank.py")
SAMPLES = 23  # odd: every world size pads


def write_tars(folder):
    """3 shards of tiny PPM images whose .cls is the sample index."""
    os.makedirs(folder, exist_ok=True)
    for s in range(3):
        with tarfile.open(os.path.join(folder, f"t-{s}.tar"), "w") as tar:
            for n in range(s * 8, min(s * 8 + 8, SAMPLES)):
                for ext, data in (("ppm", b"P6 2 2 255\n" + bytes(12)),
                                  ("cls", str(n).encode())):
                    info = tarfile.TarInfo(f"{n:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return os.path.join(folder, "t-{0..2}.tar")


def run(world, args, out):
    return run_gloo_job(RANK_SCRIPT, world, args, out)


@pytest.mark.parametrize("before,after,stop,single", [
    (4, 3, 1, False), (2, 4, 2, True), (3, 1, 2, False)])
def test_elastic_resume_covers_the_epoch_once(before, after, stop, single, tmp_path):
    folder = write_image_folder(str(tmp_path / "images"), classes=1, per_class=SAMPLES)
    tars = write_tars(str(tmp_path / "tars"))
    states, out = str(tmp_path / "states.pt"), str(tmp_path / "out.json")
    saved = run(before, ["save", folder, tars, states, out, str(stop)], out)
    resumed = run(after, ["resume", folder, tars, states, out, str(stop)]
                  + (["single"] if single else []), out)
    report = []
    for kind in ("folder", "tar", "python", "python_in_process"):
        assert resumed[0]["len"][kind] == SAMPLES
        first = [i for rank in saved for batch in rank["seen"][kind] for i in batch]
        rest = [[i for batch in rank["rest"][kind] for i in batch] for rank in resumed]
        counts = [len(rank["rest"][kind]) for rank in resumed]
        assert len(set(counts)) == 1, f"{kind}: unequal batch counts {counts}"
        delivered = collections.Counter(first + [i for r in rest for i in r])
        assert set(delivered) == set(range(SAMPLES)), f"{kind}: samples never delivered"
        repeats = sum(n - 1 for n in delivered.values())
        # Padding only: fewer than one sample per rank at each world size.
        assert repeats <= (before - 1) + (after - 1), (kind, delivered)
        assert not set(first) & {i for r in rest for i in r}, \
            f"{kind}: a consumed sample came again"
        for rank in resumed:
            assert rank["next"][kind] == rank["fresh"][kind], \
                f"{kind}: epoch 1 differs from a job always run at {after}"
        once = sum(1 for n in delivered.values() if n == 1)
        report.append(f"{kind} {before}->{after}: {len(delivered)}/{SAMPLES} delivered, "
                      f"{once} exactly once, {repeats} padding repeats, per-rank "
                      f"batches after resume {counts}")
    print("; ".join(report))


def test_python_dataset_in_process_resumes_elastically_twice():
    """2 -> 3 -> 1 within one epoch, num_workers=0 (the Python iterator)."""
    class Index(torch.utils.data.Dataset):
        def __len__(self):
            return 21

        def __getitem__(self, i):
            return torch.zeros(2), i

    def loaders(world):
        return [ringloader.DataLoader(Index(), batch_size=2, shuffle=True, seed=4,
                                      rank=r, world_size=world) for r in range(world)]

    seen = []

    def run(group, states, stop):
        out, counts = [], []
        for loader in group:
            if states is not None:
                loader.load_state_dict(states)
            loader.set_epoch(0)
            it = iter(loader)
            batches = [y for _, (_, y) in zip(range(stop), it)]
            counts.append(len(batches))
            seen.extend(int(v) for y in batches for v in y)
            out.append(loader.state_dict())
        return out, counts

    states, _ = run(loaders(2), None, 2)
    states, _ = run(loaders(3), states, 1)
    assert states[0]["elastic"] == [{"world_size": 2, "batches": [2, 2]}]
    _, counts = run(loaders(1), states, 100)
    assert counts == [-(-(21 - 8 - 6) // 2)]
    assert sorted(set(seen)) == list(range(21))
    assert len(seen) - 21 <= 1 + 2  # padding only


def test_states_that_cannot_move_are_refused_naming_why(tmp_path):
    from ringloader import transforms as T

    class Index(torch.utils.data.Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, i):
            return torch.zeros(2), i

    folder = write_image_folder(str(tmp_path / "images"), classes=1, per_class=12)
    files = ringloader.datasets.ImageFolder(folder, T.Compose([T.CenterCrop(4), T.ToTensor()]))

    def saved(dataset, rank, stop, **kwargs):
        loader = ringloader.DataLoader(dataset, batch_size=2, shuffle=True, seed=1,
                                       rank=rank, world_size=2, **kwargs)
        it = iter(loader)
        for _ in range(stop):
            next(it)
        return loader.state_dict()

    # A Python dataset in process moves too, but only with ringloader's order.
    state = saved(Index(), 0, 1)
    with pytest.raises(ValueError, match="ringloader's own order"):
        ringloader.DataLoader(Index(), batch_size=2, seed=1).load_state_dict(state)
    # Ranks at different epochs (or missing) do not merge.
    states = [saved(files, 0, 1), saved(files, 1, 2)]
    states[1]["native"]["epoch"] = 4
    target = ringloader.DataLoader(files, batch_size=2, shuffle=True, seed=1,
                                   rank=0, world_size=3)
    with pytest.raises(ValueError, match="rank 1 is at epoch 4"):
        target.load_state_dict(states)
    with pytest.raises(ValueError, match="1 states for world size 2"):
        target.load_state_dict(states[:1])
