# SPDX-License-Identifier: BSD-3-Clause
"""GPU delivery from Python (issue 17): pin_memory is honoured, device="cuda"
hands out device tensors, and a slot whose batch was copied with
non_blocking=True is not overwritten before the copy ran. The GPU tests skip
without CUDA; the option plumbing runs everywhere."""
import pytest
import torch
import torchvision.transforms as T

import ringloader

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class Records(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.full((3, 64, 64), float(i)) + torch.rand(3, 64, 64), i % 3


def native(image_folder, **kwargs):
    transform = T.Compose([T.RandomResizedCrop(32), T.ToTensor()])
    return ringloader.DataLoader(ringloader.datasets.ImageFolder(image_folder, transform),
                                 batch_size=4, num_workers=2, seed=3, **kwargs)


@pytest.mark.parametrize("pin_memory", [False, True])
def test_pin_memory_is_honoured(image_folder, pin_memory):
    loader = native(image_folder, pin_memory=pin_memory)
    assert loader.stats()["ring_pinned"] is False  # never at construction
    for _ in loader:
        pass
    assert loader.stats()["ring_pinned"] == (pin_memory and torch.cuda.is_available())


def test_cuda_device_refused_clearly_without_a_gpu(image_folder):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="cuda"):
        native(image_folder, device="cuda")
    with pytest.raises(ValueError, match="cuda"):
        ringloader.DataLoader(Records(), batch_size=4, num_workers=1, device="cuda:0")


@gpu
def test_native_batches_on_the_device_equal_host_batches(image_folder):
    host = [[t.clone() for t in batch] for batch in native(image_folder)]
    device = native(image_folder, device="cuda")
    got = [[t.cpu() for t in batch] for batch in device]
    assert len(got) == len(host)
    for ours, theirs in zip(got, host):
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


@gpu
def test_uint8_batches_finished_on_the_device(image_folder):
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.3, 0.25)
    finished = T.Compose([T.RandomResizedCrop(32), T.ToTensor(), T.Normalize(mean, std)])
    host = ringloader.DataLoader(ringloader.datasets.ImageFolder(image_folder, finished),
                                 batch_size=4, num_workers=2, seed=3)
    raw = T.Compose([T.RandomResizedCrop(32), T.PILToTensor()])
    device = ringloader.DataLoader(ringloader.datasets.ImageFolder(image_folder, raw),
                                   batch_size=4, num_workers=2, seed=3, device="cuda",
                                   device_normalize=(mean, std))
    for (x, _), (y, _) in zip(device, host):
        assert x.dtype == torch.float32 and x.is_cuda
        assert (x.cpu() - y).abs().max() <= 2e-6


def slow_consumer(loader, epochs):
    """A long kernel on the current stream, then each batch's non_blocking copy
    queued behind it; the host batch is dropped at once."""
    out = []
    for _ in range(epochs):
        for images, labels in loader:
            torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time
            out.append((images.cuda(non_blocking=True), labels.cuda(non_blocking=True)))
            del images, labels
    torch.cuda.synchronize()
    return [(x.cpu(), y.cpu()) for x, y in out]


@gpu
@pytest.mark.parametrize("python_dataset", [False, True])
def test_slow_consumer_never_sees_an_overwritten_slot(image_folder, python_dataset):
    def make(**kwargs):
        if python_dataset:
            return ringloader.DataLoader(Records(), batch_size=4, num_workers=2, seed=3,
                                         **kwargs)
        return native(image_folder, **kwargs)
    host = make(ring_slots=2)
    reference = [(x.clone(), y.clone()) for _ in range(6) for x, y in host]
    got = slow_consumer(make(ring_slots=2, pin_memory=True), 6)
    assert len(got) == len(reference)
    for i, ((x, y), (rx, ry)) in enumerate(zip(got, reference)):
        assert torch.equal(x, rx), f"batch {i}: images from another batch"
        assert torch.equal(y, ry), f"batch {i}: labels from another batch"
