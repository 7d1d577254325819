# SPDX-License-Identifier: BSD-3-Clause
"""An IterableDataset loader's state and class, beside torch's own loader:
state_dict() / load_state_dict() of a stateful stream (torchdata's
convention), refused for one without, and the loader seen as both classes
and through a subclass of ours."""
import warnings

import pytest
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data.dataloader import DataLoader as TorchDataLoader

import ringloader
from test_iterable_dataset import Sharded, _batches, assert_same


class Resumable(IterableDataset):
    """torchdata's convention: state_dict() after each item, and __iter__
    goes on from a loaded state. Worker w stops 6 items short of worker
    w-1, so the streams end at different times."""

    def __init__(self, stop):
        self.stop, self.start_at, self.after = stop, None, None

    def state_dict(self):
        return {"next": self.after}

    def load_state_dict(self, state):
        self.start_at = state["next"]

    def __iter__(self):
        info = get_worker_info()
        i = info.id if self.start_at is None else self.start_at
        while i < self.stop - 6 * info.id:
            self.after = i + info.num_workers
            yield torch.tensor([i, info.id])
            i += info.num_workers


@pytest.mark.parametrize("taken", [0, 7, 13, 15])
def test_state_dict_resumes_a_stateful_stream_where_it_was(taken):
    # 3 workers, batches of 2: 6, 5 and 4 batches. Worker 2's end is seen
    # during the 15th next(): a state saved then resumes without it.
    kwargs = dict(batch_size=2, num_workers=3)
    whole = _batches(TorchDataLoader, Resumable(35), **kwargs)[0]
    assert len(whole) == 15
    first = ringloader.DataLoader(Resumable(35), **kwargs)
    iterator = iter(first)
    head = [next(iterator) for _ in range(taken)]
    state = first.state_dict()
    resumed = ringloader.DataLoader(Resumable(35), **kwargs)
    resumed.load_state_dict(state)
    assert_same(head + list(resumed), whole)


def test_state_dict_is_refused_for_a_stream_without_one():
    loader = ringloader.DataLoader(Sharded(8), batch_size=2, num_workers=2)
    with pytest.raises(ringloader.OptionError, match="state_dict.*torchdata"):
        loader.state_dict()
    stateful = ringloader.DataLoader(Resumable(8), batch_size=2, num_workers=2)
    with pytest.raises(ringloader.OptionError, match="num_workers=2"):
        ringloader.DataLoader(Resumable(8), batch_size=2, num_workers=3).load_state_dict(
            stateful.state_dict())


def test_loader_is_both_classes_and_refuses_state_dict():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = ringloader.DataLoader(Sharded(8), batch_size=2, num_workers=2)
    assert isinstance(loader, ringloader.DataLoader)
    assert isinstance(loader, TorchDataLoader)
    assert loader.batch_size == 2 and loader.num_workers == 2
    with pytest.raises(ringloader.OptionError, match="IterableDataset"):
        loader.state_dict()


def test_a_subclass_of_ours_keeps_its_methods():
    class Counting(ringloader.DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.made_by_subclass = True

        def epochs(self):
            return "own"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = Counting(Sharded(6), batch_size=3, num_workers=1)
    assert isinstance(loader, Counting) and loader.made_by_subclass
    assert loader.epochs() == "own"
    assert_same(list(loader), _batches(TorchDataLoader, Sharded(6), batch_size=3,
                                       num_workers=1)[0])
