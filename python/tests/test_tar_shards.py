# SPDX-License-Identifier: BSD-3-Clause
"""ringloader.datasets.TarShards over shards written by Python's tarfile
(an independent writer): same bytes as the ImageFolder they came from, for
any worker count and through pipe:, native shard shuffle, named errors."""
import io
import os
import tarfile

import pytest
import torch

import ringloader
from conftest import write_image_folder
from ringloader import transforms as T


def write_shards(folder, out_dir, per_shard, fmt=tarfile.PAX_FORMAT):
    """ImageFolder order -> shards of `per_shard` samples (<n>.jpg + <n>.cls)."""
    dataset = ringloader.datasets.ImageFolder(folder)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for start in range(0, len(dataset), per_shard):
        path = os.path.join(out_dir, f"shard-{len(paths):03d}.tar")
        with tarfile.open(path, "w", format=fmt) as tar:
            for n in range(start, min(start + per_shard, len(dataset))):
                image, label = dataset.samples[n]
                ext = os.path.splitext(image)[1]
                tar.add(image, arcname=f"{n:06d}{ext}")
                info = tarfile.TarInfo(f"{n:06d}.cls")
                text = str(label).encode()
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
        paths.append(path)
    return paths


@pytest.fixture
def shards(tmp_path):
    folder = write_image_folder(str(tmp_path / "images"), classes=3, per_class=7, ext="jpg")
    write_shards(folder, str(tmp_path / "shards"), per_shard=5)
    return folder, str(tmp_path / "shards" / "shard-{000..004}.tar")


def batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def test_same_bytes_as_the_image_folder_in_the_same_order(shards):
    folder, pattern = shards
    # Not under augmentation: a tar sample's random stream is keyed by its
    # shard and place there (so a first epoch read while shards are still
    # being indexed draws the same), a file's by its index.
    pipeline = T.Compose([T.Resize((12, 12)), T.ToTensor()])
    tar = ringloader.datasets.TarShards(pattern, pipeline)
    images = ringloader.datasets.ImageFolder(folder, pipeline)
    assert len(tar) == len(images) == 21
    assert tar.shard_sizes == [5, 5, 5, 5, 1]
    assert tar.targets == images.targets
    order = list(reversed(range(21)))
    ours = batches(ringloader.DataLoader(tar, batch_size=4, sampler=order,
                                         num_workers=2, seed=3))
    theirs = batches(ringloader.DataLoader(images, batch_size=4, sampler=order,
                                           num_workers=2, seed=3))
    assert len(ours) == len(theirs) == 6
    for (x, y), (tx, ty) in zip(ours, theirs):
        assert torch.equal(x, tx) and torch.equal(y, ty)


def test_native_shuffle_is_worker_independent_and_changes_per_epoch(shards):
    _, pattern = shards
    tar = ringloader.datasets.TarShards(pattern, T.Compose([T.CenterCrop(8), T.ToTensor()]),
                                        shuffle_buffer=4)
    runs = []
    for workers in (0, 2):
        loader = ringloader.DataLoader(tar, batch_size=4, shuffle=True,
                                       num_workers=workers, seed=9)
        runs.append([batches(loader) for _ in range(2)])
    for epoch in range(2):
        for (x, y), (tx, ty) in zip(runs[0][epoch], runs[1][epoch]):
            assert torch.equal(x, tx) and torch.equal(y, ty)
    labels = [torch.cat([y for _, y in runs[0][e]]) for e in range(2)]
    assert sorted(labels[0].tolist()) == sorted(tar.targets)
    sequential = torch.tensor(tar.targets)
    first = [x for x, _ in runs[0][0]]
    second = [x for x, _ in runs[0][1]]
    assert not all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(labels[0], sequential) or not torch.equal(labels[1], sequential)


def test_pipe_shards_and_getitem(shards):
    folder, pattern = shards
    pipeline = T.Compose([T.CenterCrop(8), T.ToTensor()])
    local = ringloader.datasets.TarShards(pattern, pipeline)
    piped = ringloader.datasets.TarShards(f"pipe:cat {pattern}", pipeline)
    assert piped.urls[0] == f"pipe:cat {pattern.replace('{000..004}', '000')}"
    a = batches(ringloader.DataLoader(local, batch_size=5, num_workers=2))
    b = batches(ringloader.DataLoader(piped, batch_size=5, num_workers=2))
    for (x, y), (tx, ty) in zip(a, b):
        assert torch.equal(x, tx) and torch.equal(y, ty)
    image, label = piped[7]
    reference, reference_label = ringloader.datasets.ImageFolder(folder, pipeline)[7]
    assert label == reference_label and torch.equal(image, reference)


def test_gnu_format_long_names_and_a_corrupt_member(tmp_path):
    path = str(tmp_path / "bad.tar")
    long_key = "d" * 120 + "/000001"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for key, payload in (("000000", b"\xff\xd8 not a jpeg"), (long_key, b"junk")):
            for ext, data in (("jpg", payload), ("cls", b"4")):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    tar = ringloader.datasets.TarShards(path, T.Compose([T.CenterCrop(8), T.ToTensor()]))
    assert len(tar) == 2 and tar.targets == [4, 4]
    assert tar.member_name(1) == f"{path} member {long_key}.jpg"
    loader = ringloader.DataLoader(tar, batch_size=1, num_workers=1)
    with pytest.raises(ringloader.DecodeError, match=r"bad\.tar member 000000\.jpg"):
        batches(loader)


def test_truncated_shard_and_bad_pattern(tmp_path, shards):
    _, pattern = shards
    first = pattern.replace("{000..004}", "000")
    os.truncate(first, 2000)
    with pytest.raises(ringloader.DataIOError, match=r"shard-000\.tar is truncated"):
        ringloader.datasets.TarShards(pattern)
    with pytest.raises(ringloader.OptionError, match="unbalanced"):
        ringloader.datasets.TarShards(str(tmp_path / "x-{0..3.tar"))


def test_ranks_cover_tar_shards_once_with_equal_batch_counts(tmp_path):
    """world sizes 1-3: each rank's samples (labels = sample numbers here)
    are disjoint apart from DistributedSampler-style padding, their union
    is the dataset, every rank gets the same number of batches, and each
    rank reads a contiguous stretch of the shard order (with buffer 1:
    20 samples of 10-sample shards span at most 3 of the 6)."""
    path_pattern = str(tmp_path / "s-{0..5}.tar")
    for s in range(6):
        with tarfile.open(str(tmp_path / f"s-{s}.tar"), "w") as tar:
            for n in range(s * 10, s * 10 + 10):
                for ext, data in (("ppm", b"P6 2 2 255\n" + bytes(12)),
                                  ("cls", str(n).encode())):
                    info = tarfile.TarInfo(f"{n:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    dataset = ringloader.datasets.TarShards(path_pattern, T.Compose([T.CenterCrop(2), T.ToTensor()]),
                                            shuffle_buffer=1)
    for world in (1, 2, 3):
        seen, counts = [], []
        for rank in range(world):
            loader = ringloader.DataLoader(dataset, batch_size=4, shuffle=True, seed=5,
                                           rank=rank, world_size=world)
            labels = [int(v) for _, y in loader for v in y]
            counts.append(len(loader))
            seen.append(labels)
            if world == 3:
                assert len({v // 10 for v in labels}) <= 3, labels
        assert len(set(counts)) == 1
        flat = [v for labels in seen for v in labels]
        assert sorted(set(flat)) == list(range(60))
        padded = -(-60 // world) * world
        assert len(flat) == padded
