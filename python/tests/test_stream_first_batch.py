# SPDX-License-Identifier: BSD-3-Clause
"""An IterableDataset worker's first batch is made by its spare as soon as
the spare has its payload (_iterable_worker.serve_spare), while the
trainer sets up its native loader and starts the stub: it no longer waits
for the stub's handshake and the first task. The spare attaches to the
ring at the first item after its stub's descriptors come, so a slow first
batch is judged item by item as any worker's is, and what the first batch
raises reaches the trainer as before."""
import gc
import os
import time

import pytest
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data.dataloader import DataLoader as TorchDataLoader

import ringloader
from ringloader._trainer import python_workers as _python_workers


class Marks(IterableDataset):
    """Each worker's items (worker, i); a worker's first item creates the
    file `folder`/started-<worker>."""

    def __init__(self, folder, items=8):
        self.folder, self.items = folder, items

    def __iter__(self):
        worker = get_worker_info().id
        open(os.path.join(self.folder, f"started-{worker}"), "w").close()
        for i in range(self.items):
            yield torch.tensor([worker, i])


class _NativeWaitingForAFirstItem:
    """NativeLoader whose external() (the trainer's native setup of a
    worker, which starts its stub) first waits up to 10 s for worker 0's
    first item: it comes only if that item is made before the stub is."""

    native = _python_workers._ringloader.NativeLoader
    seen = None

    def __init__(self, folder):
        self.folder = folder

    def external(self, *args):
        deadline = time.monotonic() + 10
        marker = os.path.join(self.folder, "started-0")
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.005)
        type(self).seen = os.path.exists(marker)
        return self.native.external(*args)


def test_a_workers_first_item_is_made_before_its_stub_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(_python_workers._ringloader, "NativeLoader",
                        _NativeWaitingForAFirstItem(str(tmp_path)))
    dataset = Marks(str(tmp_path))
    ours = torch.cat(list(ringloader.DataLoader(dataset, batch_size=2, num_workers=2)))
    assert _NativeWaitingForAFirstItem.seen
    torchs = torch.cat(list(TorchDataLoader(dataset, batch_size=2, num_workers=2)))
    assert torch.equal(ours, torchs)


class SlowItems(IterableDataset):
    """Items 0.4 s apart: the first batch of 8 takes 3.2 s. Each process
    that starts the stream writes its pid in `folder`."""

    def __init__(self, folder):
        self.folder = folder

    def __iter__(self):
        open(os.path.join(self.folder, str(os.getpid())), "w").close()
        for i in range(8):
            time.sleep(0.4)
            yield i


def test_a_first_batch_slower_than_the_start_bound_is_not_a_hung_start(tmp_path, monkeypatch):
    # Start bound 1.5 s (the larger of the variable and hang_timeout): a
    # spare that made its whole first batch before it attached would be
    # judged a start that hung, killed, and its stream started again in a
    # worker forked then (the batch would still come, from that one);
    # attached at the next item, it beats.
    monkeypatch.setenv("RINGLOADER_WORKER_START_TIMEOUT_S", "1")
    loader = ringloader.DataLoader(SlowItems(str(tmp_path)), batch_size=8, num_workers=1,
                                   hang_timeout=1.5)
    assert [batch.tolist() for batch in loader] == [list(range(8))]
    assert len(os.listdir(tmp_path)) == 1  # one process made it


class FirstItemFails(IterableDataset):
    def __iter__(self):
        raise KeyError(f"no shard for worker {get_worker_info().id}")
        yield  # a generator


def test_what_the_first_batch_raises_reaches_the_trainer_with_its_type():
    for loader_class in (ringloader.DataLoader, TorchDataLoader):
        with pytest.raises(KeyError, match="no shard for worker 0"):
            next(iter(loader_class(FirstItemFails(), batch_size=2, num_workers=2)))


class Endless(IterableDataset):
    """Items 0.05 s apart, forever; each worker writes its pid first."""

    def __init__(self, folder):
        self.folder = folder

    def __iter__(self):
        open(os.path.join(self.folder, str(os.getpid())), "w").close()
        while True:
            time.sleep(0.05)
            yield 0


def test_workers_dropped_while_they_make_their_first_batch_end(tmp_path):
    loader = ringloader.DataLoader(Endless(str(tmp_path)), batch_size=1000, num_workers=2)
    iterator = iter(loader)
    deadline = time.monotonic() + 20
    while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    pids = [int(name) for name in os.listdir(tmp_path)]
    assert len(pids) == 2
    del iterator, loader
    gc.collect()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
