# SPDX-License-Identifier: BSD-3-Clause
"""TarShards(pipe_urls) without an index reads its shards in the
background (index_in_background): construction returns at once, a
DataLoader's first batch waits for the first shard of its order only, the
epochs are the ones a full index gives, and whatever needs every count
(len, shard_sizes, state_dict) waits for the index."""
import os
import threading
import time

import pytest
import torch

import ringloader
from ringloader import transforms as T
from conftest import write_image_folder
from test_shard_reencode import tool
from test_tar_shards import batches

PIPELINE = T.Compose([T.RandomResizedCrop(8), T.ToTensor()])
FIRST_SHARD = 1  # seed 3's epoch 0 visits shard 1 first (shard_order.h)


@pytest.fixture
def gated(tmp_path):
    """5 shards (7, 7, 7, 7, 2 samples) behind pipe: commands; all but
    shard FIRST_SHARD wait for a gate file before they stream."""
    import subprocess
    folder = write_image_folder(str(tmp_path / "images"), classes=3, per_class=10, ext="png")
    os.makedirs(tmp_path / "shards")
    subprocess.run([tool(), folder, str(tmp_path / "shards" / "s-%04d.tar"), "--max-count", "7"],
                   check=True, stdout=subprocess.DEVNULL)
    gate = tmp_path / "gate"
    urls = []
    for s in range(5):
        shard = tmp_path / "shards" / f"s-{s:04d}.tar"
        urls.append(f"pipe:cat {shard}" if s == FIRST_SHARD else
                    f"pipe:sh -c 'while [ ! -e {gate} ]; do sleep 0.02; done; cat {shard}'")
    return urls, gate


def loader(dataset, **kwargs):
    return ringloader.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2, seed=3,
                                 **kwargs)


def test_the_first_batch_comes_from_the_first_shard_alone(gated):
    urls, gate = gated
    start = time.monotonic()
    dataset = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=2)
    assert dataset.ringloader_indexing
    late = threading.Timer(20, gate.touch)  # a loader that waits for all would hang
    late.start()
    try:
        batch_iter = iter(loader(dataset))
        x, y = next(batch_iter)
        assert not gate.exists(), "the first batch waited for every shard"
        assert time.monotonic() - start < 15
        assert dataset.ringloader_indexing and x.shape == (4, 3, 8, 8)
        gate.touch()
        assert 1 + sum(1 for _ in batch_iter) == 8
    finally:
        late.cancel()
    assert (len(dataset), dataset.shard_sizes) == (30, [7, 7, 7, 7, 2])


def test_epochs_and_resume_are_the_full_indexs(gated):
    urls, gate = gated
    gate.touch()
    streamed = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=2)
    indexed = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=2,
                                            index_in_background=False)
    assert not indexed.ringloader_indexing
    a, b = loader(streamed), loader(indexed)
    for epoch in range(2):
        got, want = batches(a), batches(b)
        assert len(got) == len(want) == 8
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
    # A state saved early in a first epoch waits for the index, then names
    # the position an indexed loader resumes from.
    fresh = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=2)
    first = loader(fresh)
    it = iter(first)
    head = [next(it) for _ in range(3)]
    state = first.state_dict()
    tail = [(x.clone(), y.clone()) for x, y in it]
    resumed = loader(indexed)
    resumed.load_state_dict(state)
    again = batches(resumed)
    assert len(head) + len(tail) == 8 and len(again) == len(tail)
    for (x, y), (wx, wy) in zip(again, tail):
        assert torch.equal(x, wx) and torch.equal(y, wy)
