# SPDX-License-Identifier: BSD-3-Clause
"""Workers run at the trainer's priority plus DataLoader(worker_nice=...)
(Default: 0, as torch's workers; LoaderOptions::worker_nice weighs it),
native and Python workers alike, under the trainer's scheduling policy.
And an IterableDataset loader's iter() does not wait for every worker's
start (issue 46, item 1): what a start raises comes at next()."""
import gc
import os
import time

import pytest
import torch
import torchvision.transforms as T
from torch.utils.data import Dataset, IterableDataset
from torch.utils.data._utils.collate import default_collate

import ringloader
from conftest import native_worker_children, write_image_folder


def _scheduling(pid=0):
    """(policy, nice) of process `pid` (0: this one)."""
    return os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid)


def _expected(worker_nice):
    """What workers given `worker_nice` (None: the default) run under."""
    policy, nice = _scheduling()
    return policy, min(nice + (worker_nice or 0), 19)


class SchedulingRows(Dataset):
    """Each sample: the policy and nice value of the process that read it."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.tensor(_scheduling())


class SchedulingStream(IterableDataset):
    def __iter__(self):
        for _ in range(4):
            yield torch.tensor(_scheduling())


@pytest.mark.parametrize("dataset", [SchedulingRows(), SchedulingStream()],
                         ids=["map", "iterable"])
@pytest.mark.parametrize("worker_nice", [None, 0, 3])
def test_python_workers_run_worker_nice_below_the_trainer(dataset, worker_nice):
    trainer = _scheduling()
    extra = {} if worker_nice is None else {"worker_nice": worker_nice}
    loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2, **extra)
    seen = {tuple(row.tolist()) for batch in loader for row in batch}
    assert seen == {_expected(worker_nice)}
    assert _scheduling() == trainer


def _settle(pids_now, expected):
    """Each worker lowers itself as it starts, before its first sample: one
    that took no batch yet may be a moment behind."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = pids_now()
        if pids and {_scheduling(pid) for pid in pids} == {expected}:
            break
        time.sleep(0.01)
    return pids


@pytest.mark.parametrize("worker_nice", [None, 0, 5])
def test_native_workers_run_worker_nice_below_the_trainer(tmp_path, worker_nice):
    folder = write_image_folder(str(tmp_path / "images"), classes=2, per_class=4)
    dataset = ringloader.datasets.ImageFolder(folder, T.Compose([T.CenterCrop(8),
                                                                 T.ToTensor()]))
    extra = {} if worker_nice is None else {"worker_nice": worker_nice}
    loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=2, **extra)
    assert len(list(loader)) == 2
    pids = _settle(loader.worker_pids, _expected(worker_nice))
    assert len(pids) == 2
    assert {_scheduling(pid) for pid in pids} == {_expected(worker_nice)}
    del loader


@pytest.mark.parametrize("dataset", [SchedulingRows(), SchedulingStream()],
                         ids=["map", "iterable"])
@pytest.mark.parametrize("worker_nice", [-1, 20])
def test_a_worker_nice_out_of_range_is_refused(dataset, worker_nice):
    with pytest.raises(ringloader.OptionError, match="worker_nice must be in"):
        list(ringloader.DataLoader(dataset, batch_size=4, num_workers=1,
                                   worker_nice=worker_nice))


class SlowSecondStart(IterableDataset):
    """Unpickled in a worker's server, all but the first to get there take
    SLOW_S: one of the two workers starts that much later."""

    SLOW_S = 3.0

    def __init__(self, folder):
        self.folder = folder

    def __setstate__(self, state):
        self.__dict__.update(state)
        try:
            os.close(os.open(os.path.join(self.folder, "first"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            time.sleep(self.SLOW_S)

    def __iter__(self):
        yield from range(4)


def test_iter_does_not_wait_for_every_workers_start(tmp_path):
    loader = ringloader.DataLoader(SlowSecondStart(str(tmp_path)), batch_size=2,
                                   num_workers=2)
    began = time.monotonic()
    iterator = iter(loader)
    returned = time.monotonic() - began
    batches = [batch.tolist() for batch in iterator]
    assert returned < SlowSecondStart.SLOW_S / 2
    assert time.monotonic() - began >= SlowSecondStart.SLOW_S  # the slow one was waited for
    # torch's order: worker 0's, worker 1's, then each worker's second.
    assert batches == [[0, 1], [0, 1], [2, 3], [2, 3]]


class RefusedWhileFlagged:
    """Refuses to be unpickled while the file `flag` exists."""

    def __init__(self, flag):
        self.flag = flag

    def __setstate__(self, state):
        self.__dict__.update(state)
        if os.path.exists(self.flag):
            raise ValueError("refused in the worker")


class RefusedInWorkers(RefusedWhileFlagged, IterableDataset):
    def __iter__(self):
        yield from range(4)


class RefusedCollate(RefusedWhileFlagged):
    """torch's default collate, refused while flagged."""

    def __call__(self, batch):
        return default_collate(batch)


@pytest.mark.parametrize("persistent", [False, True])
def test_a_failed_start_raises_at_next_and_the_next_iter_starts_new_workers(tmp_path,
                                                                           persistent):
    # The collate_fn travels in the configuration each server unpickles:
    # refused there, the start fails (the dataset is the workers' to unpickle).
    flag = tmp_path / "refuse"
    flag.touch()
    loader = ringloader.DataLoader(RefusedInWorkers(str(tmp_path / "never")), batch_size=2,
                                   num_workers=2, persistent_workers=persistent,
                                   collate_fn=RefusedCollate(str(flag)))
    iterator = iter(loader)
    with pytest.raises(ValueError, match="refused in the worker"):
        next(iterator)
    with pytest.raises(ringloader.Error, match="could not start"):
        next(iterator)
    assert loader.worker_pids() == []
    flag.unlink()
    assert [batch.tolist() for batch in loader] == [[0, 1], [0, 1], [2, 3], [2, 3]]


@pytest.mark.parametrize("persistent", [False, True])
def test_a_dataset_the_workers_cannot_unpickle_raises_at_next_with_its_type(tmp_path,
                                                                            persistent):
    # Each worker unpickles its own copy (its server does not): the error
    # is the worker's first batch's, as a spawned torch worker's would be,
    # and the next iter() starts workers that can.
    flag = tmp_path / "refuse"
    flag.touch()
    loader = ringloader.DataLoader(RefusedInWorkers(str(flag)), batch_size=2, num_workers=2,
                                   persistent_workers=persistent)
    iterator = iter(loader)
    with pytest.raises(ValueError, match="refused in the worker") as raised:
        next(iterator)
    assert "DataLoader worker process" in str(raised.value)
    flag.unlink()
    assert [batch.tolist() for batch in loader] == [[0, 1], [0, 1], [2, 3], [2, 3]]


def test_a_node_loaders_workers_run_worker_nice_below_its_trainers(tmp_path):
    folder = write_image_folder(str(tmp_path / "images"), classes=2, per_class=4)
    dataset = ringloader.datasets.ImageFolder(folder, T.Compose([T.CenterCrop(8),
                                                                 T.ToTensor()]))
    name = f"nice-{os.getpid()}-{tmp_path.name}"[:48]
    gc.collect()  # other tests' loaders, and their workers
    others = set(native_worker_children())
    with ringloader.NodeLoader(dataset, batch_size=4, num_workers=2, name=name,
                               worker_nice=3) as node:
        node.start()
        pids = _settle(lambda: set(native_worker_children()) - others, _expected(3))
        assert len(pids) == 2
        assert {_scheduling(pid) for pid in pids} == {_expected(3)}
