# SPDX-License-Identifier: BSD-3-Clause
"""Attributes set on a DataLoader after construction take effect at the next
iter() exactly as in torch (issue 46 item 2), or raise torch's error. Each
scenario runs through torch.utils.data.DataLoader and ringloader.DataLoader
side by side and compares the batches.

torch's iterator reads dataset, batch_sampler / sampler, drop_last,
num_workers, collate_fn, worker_init_fn, generator, pin_memory, timeout,
prefetch_factor, persistent_workers and multiprocessing_context when it is
made (torch/utils/data/dataloader.py, _BaseDataLoaderIter.__init__ and
_MultiProcessingDataLoaderIter.__init__). Its __setattr__ refuses dataset,
batch_size, batch_sampler, sampler, drop_last and persistent_workers once
the loader is built; clients such as timm clear ``_DataLoader__initialized``
to set them anyway, and torch honours the new values."""
import os

import pytest
import torch
from torch.utils.data import BatchSampler, RandomSampler
from torch.utils.data import DataLoader as TorchLoader

import ringloader

# Workers (torch's forked ones, ringloader's from its zygote) inherit the
# environment: a sample made in another process says so.
os.environ.setdefault("RINGLOADER_ATTRIBUTE_TEST_PID", str(os.getpid()))
_state = {"offset": 0}  # set by worker_init_fn, in the worker


class Probe(torch.utils.data.Dataset):
    """Sample i: its value (+ `add`, + the worker_init_fn's offset) and
    whether a worker process made it."""

    def __init__(self, n=20, add=0):
        self.n, self.add = n, add

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        in_worker = str(os.getpid()) != os.environ["RINGLOADER_ATTRIBUTE_TEST_PID"]
        return torch.tensor([i + self.add + _state["offset"]]), int(in_worker)


class Noisy(torch.utils.data.Dataset):
    """A random augmentation: torch.rand in the worker."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return torch.tensor([i]), torch.rand(1)


def offset_worker_init(worker_id):
    _state["offset"] = 1000


def sum_collate(batch):
    return {"sum": sum(int(x) for x, _ in batch), "n": len(batch)}


def _plain(batch):
    if isinstance(batch, torch.Tensor):
        return batch.tolist()
    if isinstance(batch, dict):
        return {key: _plain(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [_plain(value) for value in batch]
    return batch


def _epochs(loader, epochs, between=None):
    out = []
    for epoch in range(epochs):
        if between is not None and epoch:
            between(loader)
        out.append([_plain(batch) for batch in loader])
    return out


def _set_guarded(loader, name, value):
    """As timm's MultiEpochsDataLoader sets what torch's guard refuses."""
    loader._DataLoader__initialized = False
    setattr(loader, name, value)
    loader._DataLoader__initialized = True


def _seeded_generator():
    return torch.Generator().manual_seed(7)


# (attribute, value maker, torch refuses it after construction)
_ATTRIBUTES = [
    ("dataset", lambda: Probe(add=100), True),
    ("batch_size", lambda: 7, True),
    ("batch_sampler", lambda: BatchSampler(
        RandomSampler(range(20), generator=torch.Generator().manual_seed(3)), 6, True), True),
    ("sampler", lambda: list(reversed(range(20))), True),
    ("drop_last", lambda: True, True),
    ("persistent_workers", lambda: True, True),
    ("collate_fn", lambda: sum_collate, False),
    ("worker_init_fn", lambda: offset_worker_init, False),
    ("generator", _seeded_generator, False),
    ("num_workers", lambda: 0, False),
    ("pin_memory", lambda: True, False),
    ("timeout", lambda: 30, False),
    ("prefetch_factor", lambda: 4, False),
    ("multiprocessing_context", lambda: "fork", False),
]


def _build(cls, **kwargs):
    settings = dict(batch_size=4, shuffle=True, num_workers=2)
    settings.update(kwargs)
    torch.manual_seed(11)
    return cls(Probe(), **settings)


@pytest.mark.parametrize("name,value,guarded", _ATTRIBUTES, ids=[a[0] for a in _ATTRIBUTES])
def test_set_after_construction_takes_effect_as_in_torch(name, value, guarded):
    results = []
    for cls in (TorchLoader, ringloader.DataLoader):
        loader = _build(cls)
        if guarded:
            _set_guarded(loader, name, value())
        else:
            setattr(loader, name, value())
        results.append(_epochs(loader, 2))
        assert getattr(loader, name) is not None
    assert results[1] == results[0]


@pytest.mark.parametrize("name", [a[0] for a in _ATTRIBUTES if a[2]])
def test_guarded_attribute_raises_torchs_error(name):
    messages = []
    for cls in (TorchLoader, ringloader.DataLoader):
        loader = cls(Probe(), batch_size=4)
        with pytest.raises(ValueError) as raised:
            setattr(loader, name, None)
        messages.append(str(raised.value).replace(cls.__name__, "<loader>"))
    assert messages[1] == messages[0]


@pytest.mark.parametrize("value,num_workers", [("bogus", 2), ("fork", 0), (3, 2)])
def test_bad_multiprocessing_context_raises_torchs_error(value, num_workers):
    errors = []
    for cls in (TorchLoader, ringloader.DataLoader):
        loader = cls(Probe(), batch_size=4, num_workers=num_workers)
        with pytest.raises((ValueError, TypeError)) as raised:
            loader.multiprocessing_context = value
        errors.append((type(raised.value), str(raised.value)))
    assert errors[1] == errors[0]


@pytest.mark.parametrize("persistent", [False, True])
def test_worker_init_fn_set_between_epochs_as_in_torch(persistent):
    """Non-persistent workers start again and run it; persistent ones were
    started with the first iterator and keep what they had, in torch."""
    results = []
    for cls in (TorchLoader, ringloader.DataLoader):
        loader = _build(cls, persistent_workers=persistent)
        results.append(_epochs(loader, 2, between=lambda loader: setattr(
            loader, "worker_init_fn", offset_worker_init)))
    assert results[1] == results[0]
    assert (results[0][1][0][0][0][0] >= 1000) == (not persistent)


def _multi_epochs_class(base, eager=True):
    """timm's MultiEpochsDataLoader and _RepeatSampler (timm/data/loader.py,
    ~472-490 in timm 0.9; timm 1.0.31 makes the iterator at the first
    iter() instead of in __init__: `eager`), over `base`: torch's
    DataLoader, or ringloader's (as ``python -m ringloader`` makes it)."""

    class _RepeatSampler:
        def __init__(self, sampler):
            self.sampler = sampler

        def __iter__(self):
            while True:
                yield from iter(self.sampler)

    class MultiEpochsDataLoader(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._DataLoader__initialized = False
            if self.batch_sampler is None:
                self.sampler = _RepeatSampler(self.sampler)
            else:
                self.batch_sampler = _RepeatSampler(self.batch_sampler)
            self._DataLoader__initialized = True
            self.iterator = super().__iter__() if eager else None

        def __len__(self):
            return len(self.sampler) if self.batch_sampler is None else len(
                self.batch_sampler.sampler)

        def __iter__(self):
            if self.iterator is None:
                self.iterator = super().__iter__()
            for i in range(len(self)):
                yield next(self.iterator)

    return MultiEpochsDataLoader


@pytest.mark.parametrize("drop_last,eager", [(False, True), (True, True), (True, False)])
def test_timm_multi_epochs_loader_as_in_torch(drop_last, eager):
    results = []
    for base in (TorchLoader, ringloader.DataLoader):
        torch.manual_seed(5)
        loader = _multi_epochs_class(base, eager)(Probe(n=22), batch_size=4, shuffle=True,
                                                  num_workers=2, persistent_workers=True,
                                                  drop_last=drop_last)
        results.append(_epochs(loader, 3))
    assert results[1] == results[0]
    assert [len(epoch) for epoch in results[0]] == [5 if drop_last else 6] * 3


def test_timm_multi_epochs_loader_augments_anew_each_epoch():
    """One endless iterator serves every epoch: a sample's random
    augmentation must still differ from epoch to epoch, as torch's does."""
    loader = _multi_epochs_class(ringloader.DataLoader)(
        Noisy(), batch_size=3, shuffle=True, num_workers=2)
    draws = {}
    for _ in range(3):
        for index, noise in loader:
            for i, value in zip(index.flatten().tolist(), noise.flatten().tolist()):
                draws.setdefault(i, []).append(value)
    assert all(len(values) == 3 for values in draws.values())
    assert all(len(set(values)) == 3 for values in draws.values()), draws


def test_a_rebuild_between_epochs_goes_on_with_the_next_epoch():
    """A worker_init_fn set after epoch 0 starts the workers again; epoch 1
    is still epoch 1 (its own augmentation), not epoch 0 over again."""
    loader = ringloader.DataLoader(Noisy(), batch_size=3, num_workers=2)
    first = [noise for _, noise in loader]
    loader.worker_init_fn = offset_worker_init
    second = [noise for _, noise in loader]
    assert not any(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize("drop_last", [False, True])
def test_timm_multi_epochs_loader_keeps_the_workers_it_started(drop_last):
    """Only the order changed: the workers started at construction serve
    it (a Python dataset's start is a fork and a probe of sample 0)."""
    loader = _multi_epochs_class(ringloader.DataLoader, eager=False)(
        Probe(n=22), batch_size=4, shuffle=True, num_workers=2, persistent_workers=True,
        drop_last=drop_last)
    started = loader.worker_pids()
    assert len([batch for batch in loader]) == (5 if drop_last else 6)
    assert loader.worker_pids() == started
