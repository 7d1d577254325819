# SPDX-License-Identifier: BSD-3-Clause
"""Distributed sharding across real processes: torch.distributed (gloo) on
one machine, world sizes 1, 2 and 3, each rank a ringloader.DataLoader that
reads RANK / WORLD_SIZE."""
import json
import os
import socket
import subprocess
import sys

import pytest

import ringloader
from conftest import write_image_folder

RANK_SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_rank.py")
SAMPLES = 20  # 2 classes x 10: world 3 pads 20 to 21


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_gloo_job(script, world, args, out):
    """Runs `script` once per rank (RANK, WORLD_SIZE, MASTER_* set as
    torchrun sets them), checks every rank exited 0, returns `out`'s JSON."""
    package_parent = os.path.dirname(os.path.dirname(ringloader.__file__))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(world),
               PYTHONPATH=os.pathsep.join([package_parent, os.path.dirname(__file__)]))
    ranks = [subprocess.Popen([sys.executable, script, *args],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    try:
        outputs = [p.communicate(timeout=240)[0].decode() for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
    for r, p in enumerate(ranks):
        assert p.returncode == 0, f"rank {r} failed:\n{outputs[r]}"
    with open(out) as f:
        return json.load(f)


def run_job(world, root, out):
    return run_gloo_job(RANK_SCRIPT, world, [root, out], out)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_get_disjoint_complete_equal_shards(world, tmp_path):
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=10)
    job = run_job(world, root, str(tmp_path / "gathered.json"))
    assert job["size"] == SAMPLES
    per_rank = -(-SAMPLES // world)
    ranks = job["ranks"]
    for name in ranks[0]["runs"]:
        for epoch in range(2):
            shards = [rank["runs"][name][epoch] for rank in ranks]
            counts = {len(batches) for batches in shards}
            assert counts == {-(-per_rank // 3)}, f"{name}: unequal batch counts"
            flat = [[i for batch in batches for i in batch] for batches in shards]
            assert all(len(f) == per_rank for f in flat)
            union = [i for f in flat for i in f]
            assert sorted(set(union)) == list(range(SAMPLES)), name
            # Padding (documented): the first per_rank * world - SAMPLES
            # samples of the permutation are seen twice, nothing else.
            assert len(union) - len(set(union)) == per_rank * world - SAMPLES
            if "shuffle=False" in name:
                for rank, f in zip(ranks, flat):
                    assert f == rank["torch_order"], f"{name}: not DistributedSampler's"
        if "shuffle=True" in name:
            first = [rank["runs"][name][0] for rank in ranks]
            second = [rank["runs"][name][1] for rank in ranks]
            assert first != second, f"{name}: shuffle must change with the epoch"
    # Every dataset kind shards one permutation the same way.
    for shuffle in ("False", "True"):
        orders = {json.dumps([r["runs"][name] for r in ranks])
                  for name in ranks[0]["runs"] if name.endswith(f"shuffle={shuffle}")}
        assert len(orders) == 1, f"shuffle={shuffle}: dataset kinds disagree"


def _native(image_folder):
    """24 images whose labels are their sample indices."""
    from ringloader import transforms as T
    folder = ringloader.datasets.ImageFolder(image_folder)
    return ringloader.datasets.FileList(
        [(path, i) for i, (path, _) in enumerate(folder.samples)],
        T.Compose([T.CenterCrop(8)]))


def test_environment_shards_only_when_asked(image_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    dataset = _native(image_folder)  # 24 samples
    plain = ringloader.DataLoader(dataset, batch_size=4)
    assert len(plain) == 6, "like torch's DataLoader, no sharding by default"
    assert sum(1 for _ in plain) == 6
    sharded = ringloader.DataLoader(dataset, batch_size=4, distributed=True)
    assert (sharded.rank, sharded.world_size) == (1, 2)
    assert [int(y) for _, ys in sharded for y in ys] == list(range(1, 24, 2))


def test_bad_ranks_and_samplers_are_value_errors(image_folder):
    dataset = _native(image_folder)
    with pytest.raises(ValueError, match="rank 2"):
        ringloader.DataLoader(dataset, rank=2, world_size=2)
    with pytest.raises(ValueError, match="mutually exclusive"):
        ringloader.DataLoader(dataset, distributed=True, sampler=range(24))


def test_torch_distributed_sampler_still_drives_the_order(image_folder):
    import torch
    from torch.utils.data import DistributedSampler
    dataset = _native(image_folder)

    def sampler():
        return DistributedSampler(dataset, num_replicas=3, rank=2, shuffle=True, seed=5)
    ours = ringloader.DataLoader(dataset, batch_size=3, sampler=sampler(), num_workers=1)
    theirs = torch.utils.data.DataLoader(range(len(dataset)), batch_size=3,
                                         sampler=sampler())
    for epoch in (0, 1):
        ours.set_epoch(epoch)
        theirs.sampler.set_epoch(epoch)
        labels = [int(y) for _, ys in ours for y in ys]
        assert labels == [int(i) for b in theirs for i in b]
