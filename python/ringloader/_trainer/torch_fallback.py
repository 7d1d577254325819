# SPDX-License-Identifier: BSD-3-Clause
"""What ``ringloader.DataLoader`` becomes for a dataset its ring does not
serve (an ``IterableDataset`` the native iterable path does not cover, see
docs/drop_in.md): torch's own DataLoader, so a script torch runs never
crashes under ``python -m ringloader``.

The loader is still an instance of ``ringloader.DataLoader`` (after
``python -m ringloader``'s swap, that is what ``torch.utils.data.DataLoader``
names, and frameworks check ``isinstance`` against it), and of torch's
original class; every method torch's iterator relies on is torch's own.
Why it fell back is said once per reason and process (a UserWarning)."""
import inspect
import warnings

import torch.utils.data.dataloader as _torch_dataloader

from ringloader._ringloader import OptionError
from ringloader.dataloader import DataLoader

# torch's own class. `torch.utils.data.DataLoader` may be ours by now
# (python -m ringloader swaps that name only); the module keeps torch's.
TorchDataLoader = _torch_dataloader.DataLoader
_TORCH_PARAMETERS = frozenset(inspect.signature(TorchDataLoader.__init__).parameters)
_warned = set()


def warn_once(reason):
    """The fallback's one warning per reason (a script may build a loader per epoch)."""
    if reason in _warned:
        return
    _warned.add(reason)
    warnings.warn(f"ringloader: {reason}; torch's own DataLoader loads it "
                  f"(no ring, no ringloader options)", UserWarning, stacklevel=4)


class TorchFallbackLoader(DataLoader, torch_fallback=True):
    """torch's DataLoader in a ringloader.DataLoader's clothes: torch's
    ``__init__``, iterator, ``len`` and ``multiprocessing_context``. The
    options only ringloader has are ignored (named in a warning)."""

    def __init__(self, dataset, *args, **kwargs):
        ours = sorted(name for name in kwargs if name not in _TORCH_PARAMETERS)
        # in_order=True is torch >= 2.6's default and what torch 1.13 does.
        ignored = [name for name in ours if not (name == "in_order" and kwargs[name])]
        if ignored:
            warnings.warn(f"ringloader: torch's DataLoader serves this dataset; "
                          f"{', '.join(ignored)} ignored", UserWarning, stacklevel=2)
        for name in ours:
            del kwargs[name]
        TorchDataLoader.__init__(self, dataset, *args, **kwargs)

    __len__ = TorchDataLoader.__len__
    __iter__ = TorchDataLoader.__iter__
    multiprocessing_context = TorchDataLoader.multiprocessing_context

    def set_epoch(self, epoch):
        """Passed on to the dataset if it has set_epoch (WebDataset, Hugging
        Face streaming datasets): torch's DataLoader has no set_epoch."""
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(int(epoch))

    def state_dict(self):
        raise OptionError("ringloader: state_dict() is not supported here: torch's "
                          "DataLoader serves this IterableDataset (its workers "
                          "prefetch, so no position can be saved); torchdata's "
                          "StatefulDataLoader saves one for datasets with state_dict()")

    def load_state_dict(self, state):
        self.state_dict()

    def stats(self):
        return {}

    def stats_text(self):
        return "torch's DataLoader (ringloader fell back): no ring statistics"

    def worker_pids(self):
        return []

    @property
    def _converted(self):
        return False

    @property
    def _native(self):
        return None

    @staticmethod
    def class_for(cls, reason):
        """The class a loader of class `cls` becomes (a subclass of both, so
        a user's subclass keeps its own methods over torch's); warns once."""
        warn_once(reason)
        if cls is DataLoader or issubclass(cls, TorchFallbackLoader):
            return TorchFallbackLoader if cls is DataLoader else cls
        if cls not in _subclasses:
            _subclasses[cls] = type(cls.__name__, (cls, TorchFallbackLoader),
                                    {"__module__": cls.__module__,
                                     "__qualname__": cls.__qualname__})
        return _subclasses[cls]


_subclasses = {}
