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
    def __init__(self, loader, epoch):
        self._loader, self._epoch = loader, epoch
        source = loader.batch_sampler if loader._custom_batches else loader.sampler
        self._source = iter(source)

    def start_next(self):
        """Plans the next chunk of the epoch; False when the sampler ended."""
        loader = self._loader
        size = loader.batch_size
        if loader._custom_batches:
            batches = list(itertools.islice(self._source, CHUNK_BATCHES))
            order, lengths = _batches.padded_order(batches, size)
        else:
            order = [int(i) for i in itertools.islice(self._source, CHUNK_BATCHES * size)]
            lengths = None
        if not order:
            return False
        loader._batch_lengths = lengths
        loader._native.set_order(order)
        loader._native.set_epoch(self._epoch)
        loader._native.start_epoch()
        return True
