# SPDX-License-Identifier: BSD-3-Clause
"""Samplers with no end (or no ``len``) are streamed, never read whole.

The C++ loader plans an epoch from one order. A streamed epoch is a run of
such plans, ``CHUNK_BATCHES`` batches each, all under the same epoch number
(so per-sample augmentation keys are those of one long epoch); the next
chunk is drawn from the sampler when the trainer has taken the last batch of
the current one. The cost: the ring drains once per chunk.
"""
import itertools

from . import _batches

CHUNK_BATCHES = 256


def has_len(obj):
    try:
        len(obj)
    except TypeError:
        return False
    return True


class OrderStream:
    """One streamed epoch: draws the next chunk of `source` (a sampler, or
    a batch sampler's own batches) and plans it in `native`."""

    def __init__(self, source, custom_batches, batch_size, native, epoch, pad=None):
        self._source = iter(source)
        self._custom_batches, self._batch_size = custom_batches, batch_size
        self._native, self._epoch, self._pad = native, epoch, pad
        self.batch_lengths = None  # the current chunk's custom batches' own lengths

    def start_next(self):
        """Plans the next chunk of the epoch; False when the sampler ended."""
        size = self._batch_size
        if self._custom_batches:
            batches = list(itertools.islice(self._source, CHUNK_BATCHES))
            order, lengths = _batches.padded_order(batches, size, self._pad)
        else:
            order = [int(i) for i in itertools.islice(self._source, CHUNK_BATCHES * size)]
            lengths = None
        if not order:
            return False
        self.batch_lengths = lengths
        self._native.set_order(order)
        self._native.set_epoch(self._epoch)
        self._native.start_epoch()
        return True
