# SPDX-License-Identifier: BSD-3-Clause
"""Faults lose nothing from Python either: a worker killed or crashing is
replaced and its batch re-done; a sample that keeps crashing or hanging
workers is named in the error; bad files are skipped on request."""
import ctypes
import os
import signal
import time

import pytest
import torch

import ringloader
from conftest import write_image_folder


class Numbers(torch.utils.data.Dataset):
    def __init__(self, n=40):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.002)  # long enough for a kill to land mid-batch
        return torch.full((4,), float(i)) + torch.rand(4), i


class Segfaults(Numbers):
    def __getitem__(self, i):
        if i == 13:
            ctypes.string_at(0)  # a real SIGSEGV, like a crashing decoder
        return super().__getitem__(i)


class Hangs(Numbers):
    def __getitem__(self, i):
        if i == 9:
            time.sleep(3600)  # like a read on a dead network mount
        return super().__getitem__(i)


class FirstProbeHangs(torch.utils.data.Dataset):
    """Sample 0 hangs the first time it is read anywhere (the loader
    server's probe), as a fork that inherited a held lock would."""

    def __init__(self, marker, every_time=False):
        self.marker, self.every_time = marker, every_time

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 0 and (self.every_time or not os.path.exists(self.marker)):
            open(self.marker, "w").close()
            time.sleep(3600)
        return torch.full((4,), float(i)), i


def _epoch(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def test_killed_python_worker_is_replaced_and_the_epoch_is_identical():
    # Workers reseed per sample: any worker count gives the same bytes.
    reference = _epoch(ringloader.DataLoader(Numbers(), batch_size=4, num_workers=1,
                                             seed=5))
    loader = ringloader.DataLoader(Numbers(), batch_size=4, num_workers=2, seed=5,
                                   ring_slots=3)
    got = []
    for b, (x, y) in enumerate(loader):
        if b == 1:
            os.kill(loader._native.worker_pids()[0], signal.SIGKILL)
        got.append((x.clone(), y.clone()))
    assert len(got) == len(reference) == 10
    for (x, y), (rx, ry) in zip(got, reference):
        assert torch.equal(x, rx) and torch.equal(y, ry)
    assert loader.stats()["worker_restarts"] >= 1


def test_sample_that_segfaults_every_worker_is_named_after_the_retries():
    loader = ringloader.DataLoader(Segfaults(), batch_size=4, num_workers=2,
                                   max_batch_retries=1)
    seen = []
    with pytest.raises(ringloader.WorkerError) as caught:
        for x, y in loader:
            seen.extend(y.tolist())
    message = str(caught.value)
    assert "sample 13" in message and "signal 11" in message, message
    assert "batch 3 of epoch 0" in message, message
    assert seen == list(range(12))
    assert loader.stats()["worker_restarts"] == 2


def test_hung_python_worker_is_killed_and_named():
    loader = ringloader.DataLoader(Hangs(), batch_size=4, num_workers=1,
                                   hang_timeout=0.5, max_batch_retries=0)
    with pytest.raises(ringloader.WorkerError, match=r"hung.*sample 9"):
        for _ in loader:
            pass


def test_loader_server_hung_on_its_probe_is_replaced(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "2")
    start = time.monotonic()
    loader = ringloader.DataLoader(FirstProbeHangs(str(tmp_path / "hung")), batch_size=4,
                                   num_workers=2, hang_timeout=0.5)
    labels = [y.tolist() for _, y in loader]
    assert labels == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert time.monotonic() - start < 60
    assert "gave no reply in 2 s (the workers' start timeout" in capfd.readouterr().err


def test_loader_server_that_hangs_twice_is_a_worker_error(tmp_path, monkeypatch):
    # The bound is the longer of hang_timeout and the start timeout.
    monkeypatch.setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "0.5")
    start = time.monotonic()
    with pytest.raises(ringloader.WorkerError,
                       match=r"no reply in 1 s \(the workers' start timeout.*FirstProbeHangs"
                             r".*sample 0.*killed, as was the one before it"):
        list(ringloader.DataLoader(FirstProbeHangs(str(tmp_path / "hung"), every_time=True),
                                   batch_size=4, num_workers=2, hang_timeout=1))
    assert time.monotonic() - start < 60


def test_skip_bad_files_keeps_batches_full_and_counts(tmp_path):
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=6)
    bad = os.path.join(root, "class_1", "002.png")
    with open(bad, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n truncated")
    from torchvision import transforms as T
    dataset = ringloader.datasets.ImageFolder(root, T.Compose([T.CenterCrop(16),
                                                               T.ToTensor()]))
    loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2,
                                   on_error="skip")
    sizes = [x.shape[0] for x, _ in loader]
    assert sizes == [4, 4, 4]
    assert loader.stats()["skipped_samples"] == 1
    strict = ringloader.DataLoader(dataset, batch_size=4, num_workers=2)
    with pytest.raises(ringloader.DecodeError, match="002.png"):
        list(strict)


def test_fault_options_are_validated():
    with pytest.raises(ValueError, match="on_error"):
        ringloader.DataLoader(Numbers(), on_error="ignore")
    with pytest.raises(ValueError, match="ringloader.datasets"):
        ringloader.DataLoader(Numbers(), num_workers=1, on_error="skip")
