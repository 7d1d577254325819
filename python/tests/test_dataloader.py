# SPDX-License-Identifier: BSD-3-Clause
import gc
import os

import pytest
import torch
import torchvision

import ringloader
from ringloader import transforms as T
from conftest import write_image_folder


def test_batches_alias_the_ring_and_match_torchvision(image_folder):
    """Same order, labels and pixels as torch's DataLoader over torchvision's
    ImageFolder for a deterministic pipeline."""
    tv = torchvision.transforms
    pipeline = tv.Compose([tv.CenterCrop(16), tv.ToTensor(),
                           tv.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    ours = ringloader.DataLoader(ringloader.datasets.ImageFolder(image_folder, pipeline),
                                 batch_size=5, num_workers=2)
    theirs = torch.utils.data.DataLoader(
        torchvision.datasets.ImageFolder(image_folder, pipeline), batch_size=5)
    assert len(ours) == len(theirs) == 5
    for (x, y), (tx, ty) in zip(ours, theirs):
        assert x.shape == tx.shape and x.dtype == tx.dtype
        assert torch.equal(y, ty)
        assert (x - tx).abs().max().item() <= 1e-5


def test_shuffle_order_matches_torch_with_the_same_generator(image_folder):
    dataset = ringloader.datasets.ImageFolder(image_folder, T.Compose([T.CenterCrop(8)]))
    ours = ringloader.DataLoader(dataset, batch_size=4, shuffle=True,
                                 generator=torch.Generator().manual_seed(3))
    theirs = torch.utils.data.DataLoader(range(len(dataset)), batch_size=4, shuffle=True,
                                         generator=torch.Generator().manual_seed(3))
    for epoch in range(2):
        labels = torch.cat([y for _, y in ours])
        indices = torch.cat(list(theirs))
        expected = torch.tensor([dataset.targets[i] for i in indices])
        assert torch.equal(labels, expected), f"epoch {epoch}"


def test_same_bytes_for_one_two_and_four_workers(image_folder):
    pipeline = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(),
                          T.ToTensor()])
    dataset = ringloader.datasets.ImageFolder(image_folder, pipeline)
    runs = []
    for workers in (0, 1, 2, 4):
        loader = ringloader.DataLoader(dataset, batch_size=5, shuffle=True,
                                       num_workers=workers, seed=11,
                                       generator=torch.Generator().manual_seed(5))
        runs.append([x.clone() for x, _ in loader])
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other))


def test_slot_returns_when_tensors_are_collected(image_folder):
    dataset = ringloader.datasets.ImageFolder(image_folder, T.Compose([T.CenterCrop(8)]))
    loader = ringloader.DataLoader(dataset, batch_size=2, num_workers=1, ring_slots=2,
                                   held_batches="raise")
    kept = []
    it = iter(loader)
    kept.append(next(it))
    kept.append(next(it))
    with pytest.raises(ringloader.LeaseError):
        next(it)
    kept.clear()
    gc.collect()
    assert next(it)[0].shape[0] == 2


def test_errors_map_to_python_types(image_folder, tmp_path):
    with pytest.raises(OSError):
        ringloader.datasets.ImageFolder(str(tmp_path / "missing"))
    with pytest.raises(ValueError):
        ringloader.datasets.ImageFolder(image_folder, T.Compose([T.Resize(10)]))
        ringloader.DataLoader(ringloader.datasets.ImageFolder(
            image_folder, T.Compose([T.Resize(10)])), batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        ringloader.DataLoader(ringloader.datasets.ImageFolder(
            image_folder, T.Compose([T.CenterCrop(4)])), batch_size=0)
    bad = f"{image_folder}/class_1/000.png"
    with open(bad, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n broken")
    loader = ringloader.DataLoader(ringloader.datasets.ImageFolder(
        image_folder, T.Compose([T.CenterCrop(4)])), batch_size=4, num_workers=2)
    with pytest.raises(ringloader.DecodeError, match="000.png") as info:
        for _ in loader:
            pass
    assert isinstance(info.value, ValueError)
    assert "sample 8" in str(info.value)


def test_unsupported_torchvision_transform_is_named(image_folder):
    tv = torchvision.transforms
    with pytest.raises(ValueError, match="RandomPerspective"):
        ringloader.datasets.ImageFolder(
            image_folder, tv.Compose([tv.RandomPerspective(), tv.CenterCrop(4)]))


def test_fashion_mnist_from_debian_trains_like_torch():
    """A real (short) training loop: same batches as torch's DataLoader."""
    tv = torchvision.transforms
    pipeline = tv.Compose([tv.ToTensor(), tv.Normalize([0.2860], [0.3530])])
    dataset = ringloader.datasets.FashionMNIST(train=False, transform=pipeline)
    assert len(dataset) == 10000
    ours = ringloader.DataLoader(dataset, batch_size=256, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(0))
    reference = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=True,
                                            generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step, ((x, y), (rx, ry)) in enumerate(zip(ours, reference)):
        assert torch.equal(y, ry)
        assert (x - rx).abs().max().item() <= 1e-6
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert step == len(ours) - 1 == 39
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_stats_report_time(image_folder):
    loader = ringloader.DataLoader(ringloader.datasets.ImageFolder(
        image_folder, T.Compose([T.CenterCrop(8)])), batch_size=4, num_workers=1)
    for _ in loader:
        pass
    stats = loader.stats()
    assert stats["samples"] == 24 and stats["batches"] == 6
    assert stats["decode_s"] > 0 and stats["wall_s"] > 0


def test_progress_line_reports_batches_and_rate(image_folder):
    import io
    loader = ringloader.DataLoader(ringloader.datasets.ImageFolder(
        image_folder, T.Compose([T.CenterCrop(8)])), batch_size=4, num_workers=1)
    out = io.StringIO()
    count = sum(1 for _ in ringloader.progress(loader, desc="epoch 0", stream=out))
    assert count == 6
    text = out.getvalue()
    assert "epoch 0: 6/6 batches" in text and "img/s" in text and "stall" in text


def test_fast_mode_loads_close_to_exact_and_rejects_bad_modes(tmp_path):
    root = write_image_folder(str(tmp_path / "jpegs"), classes=2, per_class=6, ext="jpg")
    exact = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToTensor()])
    fast = T.fast(exact)
    assert fast.mode == "fast" and "mode='fast'" in repr(fast)
    batches = {}
    for name, pipeline in (("exact", exact), ("fast", fast)):
        dataset = ringloader.datasets.ImageFolder(root, pipeline)
        loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2, seed=3)
        batches[name] = torch.cat([x.clone() for x, _ in loader])
    assert batches["exact"].shape == batches["fast"].shape
    assert not torch.equal(batches["exact"], batches["fast"])  # fast mode really ran
    # Same crop boxes and flips: the images stay close (random noise images,
    # so a loose bound; photos are much closer, see docs/transforms.md).
    assert (batches["exact"] - batches["fast"]).abs().mean() < 0.1
    with pytest.raises(ringloader.OptionError):
        T.Compose([T.CenterCrop(8)], mode="quick")


def test_custom_op_from_a_shared_library(image_folder):
    build = os.environ.get("RINGLOADER_BUILD_DIR",
                           os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    library = os.path.abspath(os.path.join(build, "libringloader_test_custom_ops.so"))
    if not os.path.exists(library):
        pytest.skip("the test custom-op library is not built")
    plain = T.Compose([T.CenterCrop(8), T.PILToTensor()])
    inverted = T.Compose([T.CenterCrop(8), T.Custom(library, "RandomInvert", p=1.0),
                          T.PILToTensor()])
    runs = []
    for pipeline in (plain, inverted):
        dataset = ringloader.datasets.ImageFolder(image_folder, pipeline)
        loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2)
        runs.append(torch.cat([x.clone() for x, _ in loader]))
    assert torch.equal(runs[1], 255 - runs[0])
    with pytest.raises(ringloader.OptionError, match="RandomInvert.*'p' must be in"):
        dataset = ringloader.datasets.ImageFolder(
            image_folder, T.Compose([T.CenterCrop(8), T.Custom(library, "RandomInvert", p=3)]))
        ringloader.DataLoader(dataset, batch_size=4, num_workers=1)


def test_fast_mode_is_a_pure_function_of_seed_and_sample(tmp_path):
    # Fast mode decodes JPEG regions with fancy upsampling off; libjpeg-turbo's
    # merged upsampler then read a row left over from the previous image when
    # rows above the crop were skipped, so the same sample differed between
    # loaders of one process (and between runs with workers).
    root = write_image_folder(str(tmp_path / "jpegs"), classes=2, per_class=6, ext="jpg")
    fast = T.fast(T.Compose([T.RandomResizedCrop(16), T.ToTensor()]))
    runs = []
    for _ in range(3):
        loader = ringloader.DataLoader(ringloader.datasets.ImageFolder(root, fast),
                                       batch_size=4, num_workers=0, seed=3)
        runs.append(torch.cat([x.clone() for x, _ in loader]))
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
