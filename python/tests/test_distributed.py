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


def run_job(world, root, out):
    package_parent = os.path.dirname(os.path.dirname(ringloader.__file__))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(world),
               PYTHONPATH=os.pathsep.join([package_parent, os.path.dirname(__file__)]))
    ranks = [subprocess.Popen([sys.executable, RANK_SCRIPT, root, out],
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
