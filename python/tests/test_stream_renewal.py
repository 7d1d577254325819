# SPDX-License-Identifier: BSD-3-Clause
"""A non-persistent loader over an IterableDataset keeps its worker
processes across epochs and renews them (_stream_renewal): each epoch
still gets what torch's new workers get, and a loader whose processes
cannot take a renewal starts new ones."""
import itertools
import os
import signal
import struct
import subprocess
import sys
import warnings

import pytest
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data.dataloader import DataLoader as TorchDataLoader

import ringloader
from conftest import env_importing_ringloader
from ringloader._workers import stream_renewal


@pytest.fixture
def memfd():
    fd = os.memfd_create("renewal-test", os.MFD_CLOEXEC)
    yield fd
    os.close(fd)


def test_a_stored_renewal_is_loaded_for_its_iteration_only(memfd):
    import pickle
    assert stream_renewal.load(memfd, 1) is None  # nothing stored: persistent workers
    stream_renewal.store(memfd, stream_renewal.frame(3, pickle.dumps({"x": 1})))
    assert stream_renewal.load(memfd, 3) == {"x": 1}
    assert stream_renewal.load(memfd, 2) is None and stream_renewal.load(memfd, 4) is None
    stream_renewal.store(memfd, stream_renewal.frame(4, pickle.dumps([2])))
    assert stream_renewal.load(memfd, 4) == [2] and stream_renewal.load(memfd, 3) is None


def test_a_length_past_the_memfd_is_not_read(memfd):
    # The header is shared memory: a length past the file is refused.
    os.pwrite(memfd, struct.pack("<QQ", 5, 1 << 40) + b"abc", 0)
    assert stream_renewal.load(memfd, 5) is None


def test_the_server_refuses_a_frame_whose_length_is_not_its_payloads(memfd):
    with pytest.raises(ValueError):
        stream_renewal.store(memfd, struct.pack("<QQ", 1, 10) + b"short")
    with pytest.raises(ValueError):
        stream_renewal.store(memfd, b"tiny")


class Processes(IterableDataset):
    """Each sample: a value of this copy's own, how many items this copy
    gave, and the process and server that gave it."""

    def __init__(self, count):
        self.count, self.taken = count, 0

    def __iter__(self):
        info = get_worker_info()
        for i in range(info.id, self.count, info.num_workers):
            self.taken += 1
            yield torch.tensor([i, self.taken, os.getpid(), os.getppid()])


def _epochs(loader, count):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [[batch.tolist() for batch in loader] for _ in range(count)]


def _values(epochs):
    """The batches without the process ids (torch's differ)."""
    return [[[row[:2] for row in batch] for batch in epoch] for epoch in epochs]


def _pids(epoch):
    return {(row[2], row[3]) for batch in epoch for row in batch}


def test_later_epochs_renew_the_same_processes_with_torchs_batches():
    kwargs = dict(batch_size=2, num_workers=2, generator=torch.Generator().manual_seed(3))
    ours = _epochs(ringloader.DataLoader(Processes(9), **kwargs), 3)
    torchs = _epochs(TorchDataLoader(Processes(9), **kwargs), 3)
    assert _values(ours) == _values(torchs)
    assert _pids(ours[0]) == _pids(ours[1]) == _pids(ours[2])
    assert len(_pids(ours[0])) == 2


def test_an_epoch_left_half_way_then_whole_ones_as_torchs():
    def run(loader_class):
        loader = loader_class(Processes(20), batch_size=2, num_workers=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = [batch.tolist() for batch in itertools.islice(loader, 3)]
        return [first] + _epochs(loader, 2)
    assert _values(run(ringloader.DataLoader)) == _values(run(TorchDataLoader))


def test_a_loader_whose_server_died_between_epochs_starts_new_workers():
    loader = ringloader.DataLoader(Processes(8), batch_size=2, num_workers=2)
    first = _epochs(loader, 1)[0]
    servers = {server for _, server in _pids(first)}
    for server in servers:
        os.kill(server, signal.SIGKILL)
    second = _epochs(loader, 1)[0]
    torchs = _epochs(TorchDataLoader(Processes(8), batch_size=2, num_workers=2), 2)
    assert _values([first, second]) == _values(torchs)
    assert not servers & {server for _, server in _pids(second)}


NEW_WORKERS_ZYGOTE = """
import os, signal, torch
from torch.utils.data import IterableDataset, get_worker_info
import ringloader

class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        for i in range(info.id, 8, info.num_workers):
            yield torch.tensor([i, os.getppid()])

loader = ringloader.DataLoader(Stream(), batch_size=2, num_workers=2)
servers = {int(row[1]) for batch in loader for row in batch}
for server in servers:
    os.kill(server, signal.SIGKILL)
assert len(list(loader)) == 4
with open(f"/proc/{loader._backend._zygote.pid}/stat") as stat:
    print(int(stat.read().rsplit(")", 1)[1].split()[1]) == os.getpid())
"""


def test_new_workers_zygote_is_forked_from_the_trainer_where_it_can_be():
    # A fresh trainer, one thread and a small heap, can be forked: the
    # zygote of the workers that replace the dead servers' is made in its
    # thread before their starts go to the background (from a start thread
    # the trainer can never be forked: its own thread runs on).
    done = subprocess.run([sys.executable, "-c", NEW_WORKERS_ZYGOTE], capture_output=True,
                          text=True, timeout=120, env=env_importing_ringloader())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "True"


def test_a_worker_killed_between_epochs_is_replaced_and_renewed():
    # The pool replaces it from its server's first configuration; the next
    # iter()'s renewal still reaches the new process (its first task).
    def run(loader_class, kill):
        dataset = Processes(6)
        loader = loader_class(dataset, batch_size=2, num_workers=2,
                              generator=torch.Generator().manual_seed(1))
        epochs = _epochs(loader, 1)
        if kill:
            for pid in loader.worker_pids():
                os.kill(pid, signal.SIGKILL)
        dataset.taken = 10  # the trainer's copy changes: the next epoch sees it
        return epochs + _epochs(loader, 2)
    ours, torchs = run(ringloader.DataLoader, True), run(TorchDataLoader, False)
    assert _values(ours) == _values(torchs)
    assert _values(ours)[1][0][0] == [0, 11]
