# SPDX-License-Identifier: BSD-3-Clause
"""torchvision datasets handed unchanged to ringloader.DataLoader take the
native C++ path by themselves, and give what the Python-worker path gives."""
import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data import ConcatDataset, Subset, random_split

import ringloader
from conftest import write_idx, write_image_folder

DETERMINISTIC = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(),
                           T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
RANDOM = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor()])


def batches(loader):
    return [[part.clone() if torch.is_tensor(part) else part for part in batch]
            for batch in loader]


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert type(x) is type(y)
            if torch.is_tensor(x):
                assert x.dtype == y.dtype and x.shape == y.shape
                assert torch.equal(x, y), (x - y).abs().max()
            else:
                assert x == y


def loader(dataset, **kw):
    kw.setdefault("batch_size", 5)
    kw.setdefault("num_workers", 2)
    return ringloader.DataLoader(dataset, **kw)


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mixed"))
    write_image_folder(root, classes=3, per_class=5, ext="jpg", seed=1)
    write_image_folder(root, classes=2, per_class=4, ext="png", seed=2)
    return root


def test_image_folder_goes_native_and_matches_python_workers(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, DETERMINISTIC)
    ours = loader(dataset)
    assert ours._converted
    python = loader(dataset, native=False)
    assert not python._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(ours), batches(python))
    assert_same(batches(ours), reference)


def test_random_ops_are_a_pure_function_of_seed_and_sample(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, RANDOM)
    first = batches(loader(dataset, seed=7, num_workers=2))
    again = batches(loader(dataset, seed=7, num_workers=0))
    assert_same(first, again)
    other = batches(loader(dataset, seed=8))
    assert any(not torch.equal(a[0], b[0]) for a, b in zip(first, other))


def test_target_transform_runs_in_the_trainer(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(
        mixed_folder, DETERMINISTIC, target_transform=tens_plus_one)
    ours = loader(dataset)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(ours), reference)


def test_custom_collate_sees_torchvision_samples(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, DETERMINISTIC)

    def collate(samples):
        assert all(isinstance(label, int) for _, label in samples)
        return torch.stack([image for image, _ in samples]), [label for _, label in samples]

    ours = loader(dataset, collate_fn=collate)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5,
                                                    collate_fn=collate))
    assert_same(batches(ours), reference)


def identity(image):
    return image


def tens_plus_one(label):
    return label * 10 + 1


def my_loader(path):
    from torchvision.datasets.folder import pil_loader
    return pil_loader(path)


def test_lambda_keeps_python_workers_and_says_why_once(mixed_folder, capfd):
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.Lambda(identity),
                           T.ToTensor()])
    dataset = torchvision.datasets.ImageFolder(mixed_folder, transform)
    first = loader(dataset)
    loader(dataset)
    assert not first._converted
    err = capfd.readouterr().err
    assert err.count("ringloader: ImageFolder runs in Python workers: "
                     "Lambda has no native op") == 1
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(first), reference)


def test_custom_loader_keeps_python_workers(mixed_folder, capfd):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, DETERMINISTIC,
                                               loader=my_loader)
    assert not loader(dataset)._converted
    assert "custom loader" in capfd.readouterr().err


def test_subset_random_split_and_concat(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, DETERMINISTIC)
    train, val = random_split(dataset, [16, 7], generator=torch.Generator().manual_seed(0))
    composed = ConcatDataset([Subset(dataset, [3, 1, 4]), val, train])
    ours = loader(composed)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(composed, batch_size=5))
    assert_same(batches(ours), reference)


def test_subset_of_a_ringloader_dataset(mixed_folder):
    dataset = ringloader.datasets.ImageFolder(mixed_folder, DETERMINISTIC)
    subset = Subset(dataset, [5, 0, 9, 2, 2, 11])
    ours = loader(subset)
    assert ours._converted
    whole = batches(loader(dataset, batch_size=len(dataset)))[0]
    got = batches(ours)
    images = torch.cat([b[0] for b in got])
    labels = torch.cat([b[1] for b in got])
    assert torch.equal(images, whole[0][[5, 0, 9, 2, 2, 11]])
    assert torch.equal(labels, whole[1][[5, 0, 9, 2, 2, 11]])


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(3)
    for name in ("MNIST", "FashionMNIST", "KMNIST"):
        raw = root / name / "raw"
        raw.mkdir(parents=True)
        for prefix, count in (("train", 40), ("t10k", 12)):
            write_idx(raw / f"{prefix}-images-idx3-ubyte",
                      rng.integers(0, 256, size=(count, 28, 28)))
            write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, size=count))
    return str(root)


@pytest.mark.parametrize("name", ["MNIST", "FashionMNIST", "KMNIST"])
def test_mnist_family(mnist_root, name):
    transform = T.Compose([T.Resize(32), T.ToTensor(), T.Normalize([0.5], [0.25])])
    dataset = getattr(torchvision.datasets, name)(mnist_root, train=True,
                                                  transform=transform)
    ours = loader(dataset, batch_size=8)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=8))
    assert_same(batches(ours), reference)
    assert_same(batches(ours), batches(loader(dataset, batch_size=8, native=False)))


def test_mnist_data_filtered_in_the_script_is_honoured(mnist_root):
    dataset = torchvision.datasets.MNIST(mnist_root, transform=T.ToTensor())
    keep = dataset.targets < 5
    dataset.data, dataset.targets = dataset.data[keep], dataset.targets[keep]
    test = torchvision.datasets.MNIST(mnist_root, train=False, transform=T.ToTensor())
    both = ConcatDataset([dataset, Subset(test, [0, 2, 4])])
    ours = loader(both, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1))
    assert ours._converted
    theirs = torch.utils.data.DataLoader(both, batch_size=4, shuffle=True,
                                         generator=torch.Generator().manual_seed(1))
    assert_same(batches(ours), batches(theirs))


def cifar(train_size, classes, seed):
    """A CIFAR10 object without its download (checksummed files)."""
    dataset = torchvision.datasets.CIFAR10.__new__(torchvision.datasets.CIFAR10)
    rng = np.random.default_rng(seed)
    dataset.data = rng.integers(0, 256, size=(train_size, 32, 32, 3), dtype=np.uint8)
    dataset.targets = rng.integers(0, classes, size=train_size).tolist()
    dataset.transform = T.Compose([T.RandomCrop(32, padding=4), T.ToTensor(),
                                   T.Normalize([0.49, 0.48, 0.45], [0.25, 0.24, 0.26])])
    dataset.target_transform = None
    dataset.root = "unused"
    return dataset


def test_cifar_goes_native():
    dataset = cifar(30, 10, seed=4)
    ours = loader(dataset, batch_size=6, seed=5)
    assert ours._converted
    got = batches(ours)
    assert got[0][0].shape == (6, 3, 32, 32)
    assert torch.equal(torch.cat([b[1] for b in got]), torch.tensor(dataset.targets))
    dataset.transform = T.Compose([T.ToTensor()])
    plain = batches(loader(dataset, batch_size=6))
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=6))
    assert_same(plain, reference)


def test_webp_files_keep_python_workers(tmp_path, capfd):
    from PIL import Image
    folder = tmp_path / "c"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (20, 20), (i, 0, 0)).save(folder / f"{i}.webp")
    dataset = torchvision.datasets.ImageFolder(str(tmp_path), DETERMINISTIC)
    assert not loader(dataset)._converted
    assert ".webp files" in capfd.readouterr().err


def test_native_false_and_plain_datasets_say_nothing(mixed_folder, capfd):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, DETERMINISTIC)
    assert not loader(dataset, native=False)._converted

    class Plain(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor([i])

    assert not loader(Plain(), num_workers=0)._converted
    assert "ringloader:" not in capfd.readouterr().err


def test_piltotensor_then_convert_image_dtype_goes_native(mixed_folder):
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor(),
                           T.ConvertImageDtype(torch.float), T.Normalize([0.5] * 3, [0.2] * 3)])
    dataset = torchvision.datasets.ImageFolder(mixed_folder, transform)
    ours = loader(dataset)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(ours), reference)


class PresetEval:
    """torchvision's references/classification/presets.py pattern: a class
    that holds a Compose and only forwards to it."""

    def __init__(self):
        self.transforms = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor(),
                                     T.ConvertImageDtype(torch.float),
                                     T.Normalize([0.485, 0.456, 0.406],
                                                 [0.229, 0.224, 0.225])])

    def __call__(self, img):
        return self.transforms(img)


class PresetThatDoesMore(PresetEval):
    def __call__(self, img):
        return self.transforms(img) * 2


def test_a_preset_that_only_forwards_to_its_compose_goes_native(mixed_folder):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, PresetEval())
    ours = loader(dataset)
    assert ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(ours), reference)


def test_a_preset_that_does_more_keeps_python_workers(mixed_folder, capfd):
    dataset = torchvision.datasets.ImageFolder(mixed_folder, PresetThatDoesMore())
    ours = loader(dataset)
    assert not ours._converted
    reference = batches(torch.utils.data.DataLoader(dataset, batch_size=5))
    assert_same(batches(ours), reference)
