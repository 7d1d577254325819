# SPDX-License-Identifier: BSD-3-Clause
"""torch's rules for a loader over an IterableDataset, as its own loader
applies them: when torch's loader serves it instead (``fallback_reason``),
the arguments it refuses, in torch's words, the sampler and batch sampler
it shows, and its ``len()``. The loading itself is _trainer/iterable.py's."""
from torch.utils.data import BatchSampler, IterableDataset
from torch.utils.data.sampler import Sampler

from ringloader._ringloader import OptionError


def fallback_reason(dataset, num_workers, device):
    """Why torch's own loader serves this IterableDataset, or None."""
    if not isinstance(dataset, IterableDataset):
        return None
    name = type(dataset).__name__
    try:
        from torch.utils.data import IterDataPipe
        if isinstance(dataset, IterDataPipe):
            return (f"{name} is a DataPipe (torch seeds and shards its graph itself), "
                    f"which ringloader's ring does not load")
    except ImportError:
        pass
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers <= 0:
        return (f"{name} is an IterableDataset with num_workers={num_workers!r} "
                f"(no worker processes, so nothing for the ring to carry)")
    if str(device) != "cpu":
        return f"{name} is an IterableDataset with device={device!r}, which the ring does not load"
    return None


class InfiniteConstantSampler(Sampler):
    """What torch's loader shows as ``sampler`` for an IterableDataset.

    ``Sampler.__init__`` is not called: torch 1.13's requires a data source,
    newer ones take none (and some none at all), and it stores nothing."""

    def __init__(self):  # noqa: D107 (no super().__init__: see above)
        pass

    def __iter__(self):
        while True:
            yield None


def check_arguments(shuffle, sampler, batch_sampler, batch_size, drop_last):
    """torch's checks for an IterableDataset, in torch's words."""
    for name, value in (("shuffle", shuffle), ("sampler", sampler),
                        ("batch_sampler", batch_sampler)):
        if value not in (None, False):
            raise OptionError(f"DataLoader with IterableDataset: expected unspecified "
                              f"{name} option, but got {name}={value}")
    if batch_size is None and drop_last:
        raise OptionError("batch_size=None option disables auto-batching and is "
                          "mutually exclusive with drop_last")


def samplers(batch_size, drop_last):
    """(sampler, batch_sampler) as torch's loader shows them."""
    sampler = InfiniteConstantSampler()
    return sampler, (None if batch_size is None
                     else BatchSampler(sampler, batch_size, drop_last))


def loader_len(loader):
    """torch's len() of a loader over an IterableDataset (TypeError
    without the dataset's own len)."""
    length = len(loader.dataset)
    if loader.batch_size is not None:
        length = length // loader.batch_size if loader.drop_last \
            else -(-length // loader.batch_size)
    return length
