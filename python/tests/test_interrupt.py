# SPDX-License-Identifier: BSD-3-Clause
"""Ctrl-C while the trainer waits for a batch: KeyboardInterrupt arrives
within 0.2 s (not when the batch does), and the loader stays usable: the next
`for batch in loader` starts a new epoch, like torch's, whose batches match
torch's DataLoader."""
import os
import signal
import threading
import time

import pytest
import torch
import torchvision

import ringloader
from conftest import write_image_folder

_LATENCY_S = 0.2


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler, even where the test run started with
    SIGINT ignored (a shell's background job): then Python keeps SIG_IGN."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class SlowWhileFlagged(torch.utils.data.Dataset):
    """Each sample sleeps (up to 20 s) while the flag file exists: a dataset
    on a stalled network mount. The flag is a file so spawned workers see it
    go away."""

    def __init__(self, flag, n=24):
        self.flag, self.n = flag, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        try:  # 20 s after the flag was made, in every worker
            deadline = os.path.getmtime(self.flag) + 20
        except FileNotFoundError:
            deadline = 0
        if i == 0:
            deadline = 0  # sample 0 is probed at iter() to size the ring
        while os.path.exists(self.flag) and time.time() < deadline:
            time.sleep(0.05)
        return torch.full((3,), float(i)), i


def _restart_stall(flag):
    """The stall's 20 s count from now: building a loader took 7-11 s (and
    importing torch 19 s) with the load average at 10 (torch 2.14), and a
    window that had closed before the wait let the batch come at once."""
    os.utime(flag)


def _interrupt_latency(wait):
    """Runs wait() in the main thread, sends it SIGINT after 0.5 s, and returns
    seconds from the signal to the KeyboardInterrupt, which may also come
    late, after wait() returned (None: none came)."""
    sent, returned, latency = [], [], None

    def send():
        sent.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(0.5, send)
    timer.start()
    try:
        try:
            wait()
            returned.append(time.monotonic())
        except KeyboardInterrupt:
            latency = time.monotonic() - sent[0]
        timer.join()
        time.sleep(0.01)  # an interrupt that came late lands here, not later
    except KeyboardInterrupt:
        latency = time.monotonic() - sent[0]
    assert not returned or returned[0] > sent[0], \
        "the wait ended before the signal: nothing was tested"
    return latency


def _same(ours, theirs):
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs)
    for (x, y), (tx, ty) in zip(ours, theirs):
        assert torch.equal(y, ty)
        assert x.shape == tx.shape and (x - tx).abs().max().item() <= 1e-5


def test_ctrl_c_during_a_slow_python_dataset(tmp_path):
    flag = str(tmp_path / "stalled")
    open(flag, "w").close()
    dataset = SlowWhileFlagged(flag)
    loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2)
    _restart_stall(flag)
    it = iter(loader)
    latency = _interrupt_latency(lambda: next(it))
    os.remove(flag)
    assert latency is not None and latency < _LATENCY_S, latency
    # The abandoned iterator's epoch is superseded: a full, correct epoch.
    _same(loader, torch.utils.data.DataLoader(dataset, batch_size=4))
    _same(loader, torch.utils.data.DataLoader(dataset, batch_size=4))


def test_ctrl_c_while_native_workers_are_stopped(tmp_path):
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=6)
    tv = torchvision.transforms
    pipeline = tv.Compose([tv.CenterCrop(8), tv.ToTensor()])
    loader = ringloader.DataLoader(ringloader.datasets.ImageFolder(root, pipeline),
                                   batch_size=3, num_workers=2)
    theirs = torch.utils.data.DataLoader(
        torchvision.datasets.ImageFolder(root, pipeline), batch_size=3)
    pids = loader.worker_pids()
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)

    def resume():
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    # Without a prompt interrupt the batch would never come: resume after 5 s.
    watchdog = threading.Timer(5, resume)
    watchdog.start()
    try:
        latency = _interrupt_latency(lambda: [None for _ in loader])
    finally:
        watchdog.cancel()
        resume()
    assert latency is not None and latency < _LATENCY_S, latency
    _same(loader, theirs)


def test_batch_ready_after_the_interrupt_is_not_skipped(tmp_path):
    """Going on with the same iterator after catching the interrupt gives the
    batch that was awaited, then the rest, none skipped or repeated."""
    flag = str(tmp_path / "stalled")
    open(flag, "w").close()
    dataset = SlowWhileFlagged(flag, n=12)
    loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2)
    _restart_stall(flag)
    it = iter(loader)
    latency = _interrupt_latency(lambda: next(it))
    os.remove(flag)
    assert latency is not None and latency < _LATENCY_S, latency
    _same(it, torch.utils.data.DataLoader(dataset, batch_size=4))
