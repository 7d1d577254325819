# SPDX-License-Identifier: BSD-3-Clause
"""ringloader.datasets.Mix: weighted mixing with Mosaic Streaming's
`proportion` semantics, over folders, tar shards and Python datasets:
realised proportions, determinism per (seed, epoch), resume, sharding."""
import collections
import io
import os
import tarfile

import pytest
import torch

import ringloader
from conftest import write_image_folder
from ringloader import transforms as T

PIPE = T.Compose([T.CenterCrop(4), T.ToTensor()])


def files(root, label, count):
    write_image_folder(root, classes=1, per_class=count)
    listed = ringloader.datasets.ImageFolder(root)
    return ringloader.datasets.FileList([(p, label) for p, _ in listed.samples], PIPE)


def tars(folder, label, count):
    os.makedirs(folder, exist_ok=True)
    for s in range(0, count, 5):
        with tarfile.open(os.path.join(folder, f"t-{s // 5}.tar"), "w") as tar:
            for n in range(s, min(s + 5, count)):
                for ext, data in (("ppm", b"P6 4 4 255\n" + bytes(48)),
                                  ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{n:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    last = (count - 1) // 5
    return ringloader.datasets.TarShards(os.path.join(folder, f"t-{{0..{last}}}.tar"),
                                         PIPE, shuffle_buffer=4)


class Constant(torch.utils.data.Dataset):
    """A Python dataset: label `label`, image-shaped zeros."""

    def __init__(self, label, count):
        self.label, self.count = label, count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        return torch.zeros(3, 4, 4), self.label


def labels(loader, epoch):
    loader.set_epoch(epoch)
    return [int(v) for _, y in loader for v in y]


def share(values):
    counts = collections.Counter(values)
    return {label: counts[label] / len(values) for label in sorted(counts)}


@pytest.fixture(params=["folders", "tars", "python"])
def mix(request, tmp_path):
    a = 0
    if request.param == "folders":
        a, b = files(str(tmp_path / "a"), 0, 10), files(str(tmp_path / "b"), 1, 30)
    elif request.param == "tars":
        a, b = tars(str(tmp_path / "a"), 0, 10), tars(str(tmp_path / "b"), 1, 30)
    else:
        a, b = Constant(0, 10), files(str(tmp_path / "b"), 1, 30)
    mixed = ringloader.datasets.Mix([(a, 0.7), (b, 0.3)], epoch_size=100)
    native = request.param != "python"
    assert hasattr(mixed, "ringloader_dataset_json") == native
    return request.param, mixed


def test_mix_draws_the_weights_deterministically_resumably_and_sharded(mix):
    kind, mixed = mix
    assert mixed.choose == [70, 30] and mixed.epoch_size == 100 and len(mixed) == 40
    workers = 1
    loader = ringloader.DataLoader(mixed, batch_size=4, shuffle=True, seed=2,
                                   num_workers=workers)
    assert len(loader) == 25
    first, second = labels(loader, 0), labels(loader, 1)
    assert collections.Counter(first) == {0: 70, 1: 30}, kind
    assert collections.Counter(second) == {0: 70, 1: 30}
    again = ringloader.DataLoader(mixed, batch_size=4, shuffle=True, seed=2,
                                  num_workers=workers)
    assert labels(again, 1) == second, "same (seed, epoch), same draw"
    # Resume mid-epoch.
    again.set_epoch(0)
    it = iter(again)
    head = [int(v) for _ in range(6) for v in next(it)[1]]
    state = again.state_dict()
    del it
    resumed = ringloader.DataLoader(mixed, batch_size=4, shuffle=True, seed=2,
                                    num_workers=workers)
    resumed.load_state_dict(state)
    assert head + labels(resumed, 0) == first
    # Sharded: two ranks split one draw, equal counts.
    ranks = [labels(ringloader.DataLoader(mixed, batch_size=4, shuffle=True, seed=2,
                                          num_workers=workers, rank=r, world_size=2), 0)
             for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == 50
    assert collections.Counter(ranks[0] + ranks[1]) == {0: 70, 1: 30}
    print(f"{kind}: realised {share(first)} in epoch 0, {share(second)} in epoch 1")


def test_mix_in_process_and_default_epoch_size(tmp_path):
    mixed = ringloader.datasets.Mix([(Constant(0, 10), 3), (Constant(1, 30), 1)])
    assert mixed.choose == [30, 10], "Mosaic: epoch_size defaults to the total size"
    loader = ringloader.DataLoader(mixed, batch_size=5, shuffle=True, num_workers=0)
    assert collections.Counter(labels(loader, 0)) == {0: 30, 1: 10}
    with pytest.raises(ValueError, match="weight"):
        ringloader.datasets.Mix([(Constant(0, 3), 0)])
