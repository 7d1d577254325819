# SPDX-License-Identifier: BSD-3-Clause
"""The shared sample table (issue 29): ringloader.datasets.ImageFolder gives
torchvision's samples / targets / classes exactly, serves them lazily from
one table, and a worker's memory does not grow with the dataset."""
import collections.abc
import os
import pickle

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image

import ringloader
from conftest import native_worker_children
from ringloader import datasets

SMALL = T.Compose([T.Resize((16, 16)), T.ToTensor()])


def make_tree(root):
    """Every case torchvision's scan has an answer for: nested folders,
    extensions in any case, non-images, symlinked files and folders, a
    dangling symlink, a folder named like an image, byte-order sorting."""
    for folder in ["b", "a/sub/deeper", "a/sub2", "B", "c-d", "c"]:
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    image = Image.fromarray(np.full((8, 8, 3), 200, np.uint8))
    for name in ["b/2.png", "b/10.JPG", "a/z.jpeg", "a/sub/y.png", "a/sub/deeper/x.PNG",
                 "a/sub2/w.bmp", "B/x.bmp", "c-d/1.png", "c/q.jpg", "c/Q.jpg"]:
        image.save(os.path.join(root, name), format="PNG")
    open(os.path.join(root, "a", "notes.txt"), "w").close()
    open(os.path.join(root, "b", "data.npy"), "w").close()
    os.symlink(os.path.join(root, "b", "2.png"), os.path.join(root, "c", "link.png"))
    os.symlink(os.path.join(root, "a", "sub2"), os.path.join(root, "c", "linked_dir"))
    os.symlink(os.path.join(root, "missing.png"), os.path.join(root, "c", "dangling.png"))
    os.makedirs(os.path.join(root, "c", "folder.jpg"))
    image.save(os.path.join(root, "c", "folder.jpg", "inner.png"), format="PNG")
    return str(root)


def assert_like_torchvision(ours, theirs):
    assert ours.classes == theirs.classes
    assert ours.class_to_idx == theirs.class_to_idx
    assert len(ours) == len(theirs)
    assert list(ours.samples) == theirs.samples
    assert list(ours.imgs) == getattr(theirs, "imgs", theirs.samples)
    assert list(ours.targets) == theirs.targets
    assert [ours.samples[i] for i in range(len(ours))] == theirs.samples
    assert ours.samples[-1] == theirs.samples[-1]
    assert ours.samples[1:4] == theirs.samples[1:4]


def test_image_folder_equals_torchvision(tmp_path):
    root = make_tree(tmp_path)
    assert_like_torchvision(datasets.ImageFolder(root), torchvision.datasets.ImageFolder(root))


def test_is_valid_file_equals_torchvision(tmp_path):
    root = make_tree(tmp_path)

    def valid(path):
        return "sub" not in path and not path.endswith(".npy")
    ours = datasets.ImageFolder(root, is_valid_file=valid)
    assert_like_torchvision(ours, torchvision.datasets.ImageFolder(root, is_valid_file=valid))
    assert any(path.endswith("notes.txt") for path, _ in ours.samples)


def test_is_valid_file_that_empties_a_class_raises_like_torchvision(tmp_path):
    root = make_tree(tmp_path)

    def valid(path):
        return "/B/" not in path
    with pytest.raises(FileNotFoundError):
        torchvision.datasets.ImageFolder(root, is_valid_file=valid)
    with pytest.raises(FileNotFoundError, match="B"):
        datasets.ImageFolder(root, is_valid_file=valid)


def test_extensions_equal_torchvision_dataset_folder(tmp_path):
    root = make_tree(tmp_path)
    for extensions in ((".png",), (".png", "jpg"), ".bmp", (".PNG", ".png", ".bmp", ".jpg")):
        try:
            theirs = torchvision.datasets.DatasetFolder(
                root, torchvision.datasets.folder.default_loader, extensions=extensions)
        except FileNotFoundError:
            with pytest.raises(ringloader.DataIOError):
                datasets.ImageFolder(root, extensions=extensions)
            continue
        assert_like_torchvision(datasets.ImageFolder(root, extensions=extensions), theirs)
    with pytest.raises(ValueError):
        datasets.ImageFolder(root, extensions=(".png",), is_valid_file=bool)


def test_samples_and_targets_are_lazy_views_of_one_table(tmp_path):
    root = make_tree(tmp_path)
    ours = datasets.ImageFolder(root)
    for view in (ours.samples, ours.targets):
        assert isinstance(view, collections.abc.Sequence) and not isinstance(view, list)
    labels = np.asarray(ours.targets)
    assert labels.dtype == np.int64 and not labels.flags.writeable
    assert labels.tolist() == list(ours.targets)
    assert torch.tensor(ours.targets).tolist() == list(ours.targets)
    # The description that reaches workers names the table, not the samples.
    description = ours.ringloader_dataset_json()
    assert len(description) < 400 and "/fd/" in description
    with pytest.raises(IndexError):
        ours.samples[len(ours)]


def test_pickled_image_folder_reopens_the_table(tmp_path):
    root = make_tree(tmp_path)
    ours = datasets.ImageFolder(root, SMALL)
    copy = pickle.loads(pickle.dumps(ours))
    assert list(copy.samples) == list(ours.samples) and copy.classes == ours.classes
    assert torch.equal(copy[3][0], ours[3][0]) and copy[3][1] == ours[3][1]


def test_loader_batches_equal_torchvision(tmp_path):
    root = make_tree(tmp_path)
    os.unlink(os.path.join(root, "c", "dangling.png"))
    ours = datasets.ImageFolder(root, SMALL)
    theirs = torchvision.datasets.ImageFolder(root, SMALL)
    got = [(x.clone(), y.clone()) for x, y in
           ringloader.DataLoader(ours, batch_size=4, num_workers=2)]
    want = list(torch.utils.data.DataLoader(theirs, batch_size=4))
    assert len(got) == len(want)
    for (x, y), (tx, ty) in zip(got, want):
        assert torch.equal(y, ty)
        assert torch.allclose(x, tx, atol=1 / 255)


def test_file_changed_after_construction_is_named(tmp_path):
    root = make_tree(tmp_path)
    os.unlink(os.path.join(root, "c", "dangling.png"))
    ours = datasets.ImageFolder(root, SMALL)
    index = [path for path, _ in ours.samples].index(os.path.join(root, "b", "2.png"))
    os.unlink(os.path.join(root, "b", "2.png"))
    with pytest.raises(ringloader.DataIOError) as error:
        list(ringloader.DataLoader(ours, batch_size=4, num_workers=1))
    assert f"sample {index}" in str(error.value) and "b/2.png" in str(error.value)


def make_symlink_folder(root, classes, per_class):
    os.makedirs(root)
    target = os.path.join(root, "one.png")
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(target)
    for c in range(classes):
        folder = os.path.join(root, "data", f"n{c:08d}")
        os.makedirs(folder)
        for j in range(per_class):
            os.symlink(target, os.path.join(folder, f"n{c:08d}_{j:06d}.JPEG"))
    return os.path.join(root, "data")


def worker_private_kib(exclude=()):
    """Private (non-shared) KiB of each ringloader-worker child of this process."""
    sizes = {}
    for pid in native_worker_children():
        if pid in exclude:
            continue
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        sizes[pid] = sum(int(fields[k].split()[0]) for k in ("Private_Clean", "Private_Dirty"))
    return sizes


def private_after_a_few_batches(root, exclude=()):
    return workers_private_after_batches(datasets.ImageFolder(root, SMALL), exclude,
                                         shuffle=True)


def workers_private_after_batches(dataset, exclude=(), shuffle=False):
    """Each worker's private KiB after 8 batches of 64 from 2 workers."""
    loader = ringloader.DataLoader(dataset, batch_size=64, shuffle=shuffle, num_workers=2)
    it = iter(loader)
    for _ in range(8):
        next(it)
    sizes = worker_private_kib(exclude)
    del it, loader
    return sizes


def test_worker_private_memory_does_not_grow_with_the_dataset(tmp_path):
    """Before the shared table each worker parsed the whole file list from
    its configuration: ~250 bytes per sample, some 40 MiB here."""
    small = make_symlink_folder(tmp_path / "small", 10, 100)
    large = make_symlink_folder(tmp_path / "large", 100, 1500)
    earlier = set(worker_private_kib())  # other tests' workers still exiting
    small_kib = private_after_a_few_batches(small, exclude=earlier)
    large_kib = private_after_a_few_batches(large, exclude=earlier | set(small_kib))
    assert len(small_kib) == 2 and len(large_kib) == 2
    assert max(large_kib.values()) - max(small_kib.values()) < 8 * 1024, (small_kib, large_kib)
