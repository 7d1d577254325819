# SPDX-License-Identifier: BSD-3-Clause
"""The shared tar sample table (issue 29): TarShards keeps its samples in
one sealed memfd that every worker maps read-only; ``targets`` is a view of
its labels, the description that reaches a worker names the table instead
of carrying every sample, and a worker's memory does not grow with the
number of samples."""
import io
import json
import os
import pickle
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image

import ringloader
from ringloader import datasets
from ringloader import transforms as T
from test_index_table import worker_private_kib, workers_private_after_batches

SMALL = T.Compose([T.Resize((16, 16)), T.ToTensor()])


def png_bytes(value):
    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def write_sparse_tar_dataset(root, total, real, per_shard=None):
    """Shards of `per_shard` samples whose first `real` samples are real
    members (an 8x8 PNG + .cls), and a shard index listing `total` samples:
    the others point at 1 KiB steps of a sparse tail (never read here), so a
    large dataset costs no disk. Returns (shard pattern, index path)."""
    per_shard = per_shard or total
    os.makedirs(root, exist_ok=True)
    shardlist, sample = [], 0
    for shard in range((total + per_shard - 1) // per_shard):
        path = os.path.join(root, f"s-{shard:04d}.tar")
        count = min(per_shard, total - sample)
        offsets, sizes, labels, names = [], [], [], []
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for n in range(min(real, count)):
                data, key = png_bytes((sample + n) % 251), f"{sample + n:08d}"
                info = tarfile.TarInfo(f"{key}.png")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                text = str((sample + n) % 1000).encode()
                info = tarfile.TarInfo(f"{key}.cls")
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".png"):
                    offsets.append(member.offset_data)
                    sizes.append(member.size)
                    names.append(member.name)
        written = len(names)
        labels = [(sample + n) % 1000 for n in range(written)]
        end = os.path.getsize(path) + 512
        for n in range(written, count):
            offsets.append(end + 1024 * (n - written))
            sizes.append(100)
            labels.append((sample + n) % 1000)
            names.append(f"{sample + n:08d}.png")
        size = os.path.getsize(path)
        if count > written:
            size = offsets[-1] + 1024
            os.truncate(path, size)  # a hole: no disk
        shardlist.append({"url": os.path.basename(path), "nsamples": count, "filesize": size,
                          "ringloader": {"offsets": offsets, "sizes": sizes,
                                         "labels": labels, "names": names}})
        sample += count
    index = os.path.join(root, "index.json")
    with open(index, "w") as f:
        json.dump({"__kind__": "wids-shard-index-v1", "wids_version": 1,
                   "ringloader_index": 1, "shardlist": shardlist}, f)
    return os.path.join(root, f"s-{{0000..{len(shardlist) - 1:04d}}}.tar"), index


def test_targets_are_a_view_and_the_description_names_the_table(tmp_path):
    pattern, index = write_sparse_tar_dataset(str(tmp_path / "d"), total=50, real=50,
                                              per_shard=20)
    streamed = datasets.TarShards(pattern, SMALL)
    indexed = datasets.TarShards(pattern, SMALL, index=index)
    assert len(streamed) == len(indexed) == 50 and streamed.shard_sizes == [20, 20, 10]
    labels = np.asarray(indexed.targets)
    assert labels.dtype == np.int64 and not labels.flags.writeable
    assert labels.tolist() == [n % 1000 for n in range(50)] == list(streamed.targets)
    assert streamed.targets == indexed.targets and indexed.targets[-1] == 49
    assert indexed.member_name(21) == f"{tmp_path}/d/s-0001.tar member 00000021.png"
    description = indexed.ringloader_dataset_json()
    assert "/fd/" in description and "00000021" not in description
    assert len(description) < 1000
    copy = pickle.loads(pickle.dumps(indexed))
    assert list(copy.targets) == list(indexed.targets) and copy.urls == indexed.urls
    assert torch.equal(copy[21][0], streamed[21][0]) and copy[21][1] == 21
    got = [(x.clone(), y.clone()) for x, y in
           ringloader.DataLoader(indexed, batch_size=8, num_workers=2)]
    want = [(x.clone(), y.clone()) for x, y in
            ringloader.DataLoader(streamed, batch_size=8, num_workers=1)]
    assert len(got) == len(want) == 7
    for (x, y), (tx, ty) in zip(got, want):
        assert torch.equal(x, tx) and torch.equal(y, ty)


def test_a_native_mix_of_tar_shards_reads_through_its_own_table(tmp_path):
    a_pattern, a_index = write_sparse_tar_dataset(str(tmp_path / "a"), total=12, real=12)
    b_pattern, _ = write_sparse_tar_dataset(str(tmp_path / "b"), total=9, real=9)
    a = datasets.TarShards(a_pattern, SMALL, index=a_index)
    b = datasets.TarShards(b_pattern, SMALL)
    mix = datasets.Mix([(a, 1.0), (b, 1.0)])
    description = mix.ringloader_dataset_json()
    assert "/fd/" in description and json.loads(description)["count"] == 21
    streamed = datasets.Mix([(datasets.TarShards(a_pattern, SMALL), 1.0), (b, 1.0)])

    def epoch(dataset):
        return [(x.clone(), y.clone()) for x, y in
                ringloader.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2, seed=1)]
    got, want = epoch(mix), epoch(streamed)
    assert len(got) == len(want) == 6
    for (x, y), (tx, ty) in zip(got, want):
        assert torch.equal(x, tx) and torch.equal(y, ty)


def private_after_a_few_batches(pattern, index, exclude=()):
    return workers_private_after_batches(datasets.TarShards(pattern, SMALL, index=index),
                                         exclude)


def test_worker_private_memory_does_not_grow_with_the_tar_dataset(tmp_path):
    """Before the shared table each worker parsed every sample out of its
    configuration into its own index: some 30 MiB each here."""
    small = write_sparse_tar_dataset(str(tmp_path / "small"), total=2_000, real=1_500)
    large = write_sparse_tar_dataset(str(tmp_path / "large"), total=300_000, real=1_500)
    earlier = set(worker_private_kib())  # other tests' workers still exiting
    small_kib = private_after_a_few_batches(*small, exclude=earlier)
    large_kib = private_after_a_few_batches(*large, exclude=earlier | set(small_kib))
    assert len(small_kib) == 2 and len(large_kib) == 2
    assert max(large_kib.values()) - max(small_kib.values()) < 8 * 1024, (small_kib, large_kib)


def test_a_corrupt_table_behind_a_description_is_named(tmp_path):
    pattern, _ = write_sparse_tar_dataset(str(tmp_path / "d"), total=10, real=10)
    tar = datasets.TarShards(pattern, SMALL)
    description = json.loads(tar.ringloader_dataset_json())
    description["count"] = 11
    with pytest.raises(ringloader.DataIOError, match="tar sample table .* holds 10 samples"):
        ringloader._ringloader.dataset_from_json(json.dumps(description))
    description["table"] = "/proc/self/fd/100000"
    with pytest.raises(ringloader.DataIOError, match="/proc/self/fd/100000"):
        ringloader._ringloader.dataset_from_json(json.dumps(description))


def test_pipe_shards_indexed_several_at_once_give_the_one_at_a_time_table(tmp_path):
    """Lower shards' commands wait longer, so they finish last; the table is
    in shard order all the same (the C++ TarIndexStreamsTest shows the
    commands overlap)."""
    write_sparse_tar_dataset(str(tmp_path / "d"), total=60, real=60, per_shard=7)
    urls = [f"pipe:sleep {0.02 * (9 - s)}; cat {tmp_path}/d/s-{s:04d}.tar" for s in range(9)]
    one = datasets.TarShards(urls, SMALL, index_streams=1)
    eight = datasets.TarShards(urls, SMALL, index_streams=8)
    assert one.shard_sizes == eight.shard_sizes == [7] * 8 + [4]
    assert list(one.targets) == list(eight.targets) == [n % 1000 for n in range(60)]
    assert [eight.member_name(i) for i in (0, 30, 59)] == [one.member_name(i) for i in (0, 30, 59)]
    assert torch.equal(one[33][0], eight[33][0])
    with pytest.raises(ValueError, match="index_streams must be >= 1"):
        datasets.TarShards(urls, SMALL, index_streams=0)
