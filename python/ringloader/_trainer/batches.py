# SPDX-License-Identifier: BSD-3-Clause
"""A user's own batch sampler (a ``BatchSampler`` subclass, or any object
with ``batch_size``, ``__iter__`` and ``__len__``) keeps its own batches,
as with torch, including batches shorter than ``batch_size``.

The ring's slots hold ``batch_size`` samples and the C++ plan cuts the
epoch's order into batches of that size. So each of the sampler's batches
is padded to ``batch_size``, and the trainer's iterator keeps only the
batch's own samples. C++ workers pad with repeats of the batch's last index
(the padding costs their decodes); Python workers pad with the index
``len(dataset)``, for which they make nothing.
"""
from torch.utils.data import BatchSampler

from ringloader._ringloader import OptionError


def is_custom(batch_sampler):
    """True when the batches are the sampler's own, not torch's BatchSampler
    cut of ``batch_sampler.sampler`` (which the C++ plan makes itself)."""
    return type(batch_sampler) is not BatchSampler


def capacity(batch_sampler, fallback=None):
    """The slot size: the sampler's batch_size (the longest batch it yields),
    else `fallback` (the loader's batch_size, for a batch sampler set after
    construction: timm's endless _RepeatSampler has none of its own)."""
    size = getattr(batch_sampler, "batch_size", fallback)
    if not isinstance(size, int) or size < 1:
        raise OptionError(
            f"ringloader: batch_sampler {type(batch_sampler).__name__} needs a positive "
            "int batch_size attribute (the longest batch it yields), since ring slots "
            "have a fixed size")
    return size


def padded_order(batch_sampler, size, pad=None):
    """This epoch's batches, as (flat order padded to `size` per batch,
    each batch's own length). `pad` pads; None repeats the batch's last
    index (Python workers pad with an index they skip: no repeated
    ``dataset[i]`` calls)."""
    order, lengths = [], []
    for number, batch in enumerate(batch_sampler):
        batch = [int(i) for i in batch]
        if not 0 < len(batch) <= size:
            raise OptionError(
                f"ringloader: batch_sampler yielded batch {number} of {len(batch)} "
                f"samples; batches must hold 1 to batch_size ({size}) samples")
        order.extend(batch + [batch[-1] if pad is None else pad] * (size - len(batch)))
        lengths.append(len(batch))
    return order, lengths


def own_batches(batch_sampler):
    """The epoch's batches, for the in-process iterator."""
    return [[int(i) for i in batch] for batch in batch_sampler]
