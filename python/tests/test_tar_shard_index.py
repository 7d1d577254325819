# SPDX-License-Identifier: BSD-3-Clause
"""TarShards(..., index=...): the shard index ringloader-shard --index-only
writes (for shards written by Python's tarfile, an independent writer)
replaces reading every pipe: shard at construction, gives the same epochs,
and a corrupt, foreign or stale one is a named error."""
import json
import os
import subprocess

import pytest
import torch

import ringloader
from conftest import write_image_folder
from ringloader import transforms as T
from test_shard_reencode import tool
from test_tar_shards import batches, write_shards


@pytest.fixture
def indexed(tmp_path):
    """pipe: shards that count their reads, and their index (made once)."""
    folder = write_image_folder(str(tmp_path / "images"), classes=3, per_class=7, ext="jpg")
    write_shards(folder, str(tmp_path / "shards"), per_shard=5)
    counter = tmp_path / "runs"
    urls = f"pipe:echo >> {counter}; cat {tmp_path}/shards/shard-{{000..004}}.tar"
    index = str(tmp_path / "index.json")
    subprocess.run([tool(), "--index-only", index, urls], check=True, stdout=subprocess.DEVNULL)
    return urls, index, counter


def reads(counter):
    return len(counter.read_text().splitlines())


def test_the_index_replaces_the_pass_and_gives_the_same_epochs(indexed):
    urls, index, counter = indexed
    assert reads(counter) == 5
    pipeline = T.Compose([T.RandomResizedCrop(8), T.ToTensor()])
    fast = ringloader.datasets.TarShards(urls, pipeline, shuffle_buffer=4, index=index)
    assert reads(counter) == 5  # nothing streamed to construct it
    slow = ringloader.datasets.TarShards(urls, pipeline, shuffle_buffer=4)
    assert (fast.shard_sizes, fast.targets, fast.urls) == (slow.shard_sizes, slow.targets, slow.urls)
    assert fast.member_name(7) == slow.member_name(7)
    for epoch in range(2):
        a = ringloader.DataLoader(fast, batch_size=4, shuffle=True, num_workers=2, seed=5)
        b = ringloader.DataLoader(slow, batch_size=4, shuffle=True, num_workers=2, seed=5)
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        for (x, y), (tx, ty) in zip(batches(a), batches(b)):
            assert torch.equal(x, tx) and torch.equal(y, ty)
    # No URLs: the index's own shard list.
    alone = ringloader.datasets.TarShards(None, index=index)
    assert alone.urls == slow.urls and len(alone) == 21


def test_a_corrupt_or_foreign_index_is_named(indexed, tmp_path):
    urls, index, _ = indexed
    with open(index) as f:
        good = json.load(f)

    def write(manifest, name="bad.json"):
        path = str(tmp_path / name)
        with open(path, "w") as f:
            f.write(manifest if isinstance(manifest, str) else json.dumps(manifest))
        return path

    cut = write(json.dumps(good)[:200])
    with pytest.raises(ringloader.DataIOError, match=f"shard index {cut}: not valid JSON"):
        ringloader.datasets.TarShards(urls, index=cut)
    bad = json.loads(json.dumps(good))
    bad["shardlist"][1]["nsamples"] = 9
    path = write(bad)
    with pytest.raises(ringloader.DataIOError,
                       match=f'shard index {path}: shard 1: "nsamples" is 9 but "offsets" holds 5'):
        ringloader.datasets.TarShards(urls, index=path)
    with pytest.raises(ringloader.OptionError, match="lists 5 shards, the URLs give 1"):
        ringloader.datasets.TarShards(urls.replace("{000..004}", "000"), index=index)
    wids = {"__kind__": "wids-shard-index-v1", "wids_version": 1,
            "shardlist": [{"url": e["url"], "nsamples": e["nsamples"]} for e in good["shardlist"]]}
    path = write(wids, "wids.json")
    # Counts only: pipe: shards are read by streaming (test_tar_counts_index.py).
    assert ringloader.datasets.TarShards(urls, index=path).counts_only


def test_a_stale_index_is_named_never_other_samples(tmp_path):
    folder = write_image_folder(str(tmp_path / "images"), classes=2, per_class=5, ext="jpg")
    paths = write_shards(folder, str(tmp_path / "shards"), per_shard=5)
    index = str(tmp_path / "index.json")
    subprocess.run([tool(), "--index-only", index] + paths, check=True, stdout=subprocess.DEVNULL)
    piped = [f"pipe:cat {p}" for p in paths]
    pipe_index = str(tmp_path / "pipe.json")
    subprocess.run([tool(), "--index-only", pipe_index] + piped, check=True,
                   stdout=subprocess.DEVNULL)
    pipe_dataset = ringloader.datasets.TarShards(
        piped, T.Compose([T.CenterCrop(4), T.ToTensor()]), index=pipe_index)
    # Rewritten with the two shards swapped: same kind of data, other samples.
    os.rename(paths[0], paths[0] + ".old")
    os.rename(paths[1], paths[0])
    os.rename(paths[0] + ".old", paths[1])
    with open(paths[0], "ab") as f:  # and one grew (its sizes may have matched)
        f.write(bytes(1024))
    with pytest.raises(ringloader.DataIOError, match=f"shard {paths[0]}: stale index {index}"):
        ringloader.datasets.TarShards(paths, index=index)
    # Read in Python (dataset[i], Python transforms): the worker's own reader,
    # which checks every member header it streams past on the way.
    with pytest.raises(ringloader.DataIOError,
                       match=rf"shard pipe:cat {paths[0]}: stale index {pipe_index}: "
                             r"member '000000\.jpg' .*\(reading member '000001\.jpg'\)"):
        pipe_dataset[1]
    loader = ringloader.DataLoader(pipe_dataset, batch_size=5, num_workers=1)
    # Through a worker, the message is fitted to the slot's error record:
    # the middle (the command, named twice) may be elided, the reason not.
    with pytest.raises(ringloader.DataIOError,
                       match=r"sample 0 \(pipe:cat .*shard-000\.tar: stale index "
                             rf"{pipe_index}: member '000000\.jpg'"):
        batches(loader)
