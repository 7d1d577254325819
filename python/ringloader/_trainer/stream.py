# SPDX-License-Identifier: BSD-3-Clause
"""Samplers with no end (or no ``len``) are streamed, never read whole.

The C++ loader plans an epoch from one order. A streamed epoch is a run of
such plans (chunks), up to ``CHUNK_BATCHES`` batches each; the next chunk
is drawn from the sampler when the trainer has taken the last batch of the
current one. The cost: the ring drains once per chunk.

Random augmentation is keyed by (seed, epoch, sample index) (_worker.py),
so a sample drawn twice under one key would be augmented the same way
twice: an endless sampler that repeats the dataset (timm's
MultiEpochsDataLoader runs every epoch through one such iterator) would
freeze each sample's augmentation. So a chunk ends before the first batch
that repeats one of its samples, and each chunk after the first has a key
of its own (``chunk_epoch``), where torch's workers would draw on.
"""
import itertools

from ringloader._trainer import batches as _batches

CHUNK_BATCHES = 256


def has_len(obj):
    try:
        len(obj)
    except TypeError:
        return False
    return True


def chunk_epoch(epoch, chunk):
    """The epoch key of a streamed epoch's chunk: the epoch's own for the
    first, then keys no epoch below 2**32 has."""
    return epoch if chunk == 0 else epoch + (chunk << 32)


class OrderStream:
    """One streamed epoch: draws the next chunk of `source` (a sampler, or
    a batch sampler's own batches) and plans it in `native`."""

    def __init__(self, source, custom_batches, batch_size, native, epoch, pad=None):
        self._source = iter(source)
        self._custom_batches, self._batch_size = custom_batches, batch_size
        self._native, self._epoch, self._pad = native, epoch, pad
        self._chunk = 0
        self._held = None  # the batch that began the next chunk (it repeated a sample)
        self.batch_lengths = None  # the current chunk's custom batches' own lengths

    def start_next(self):
        """Plans the next chunk of the epoch; False when the sampler ended."""
        batches = self._next_batches()
        if not batches:
            return False
        size = self._batch_size
        if self._custom_batches:
            order, lengths = _batches.padded_order(batches, size, self._pad)
        else:
            order, lengths = [i for batch in batches for i in batch], None
        self.batch_lengths = lengths
        self._native.set_order(order)
        self._native.set_epoch(chunk_epoch(self._epoch, self._chunk))
        self._native.start_epoch()
        self._chunk += 1
        return True

    def _next_batches(self):
        """Up to CHUNK_BATCHES batches (lists of indices), ending before one
        that repeats a sample of the chunk; a sampler's samples are cut in
        batch_size runs, so the plan's batches stay torch's."""
        batches, seen = [], set()
        while len(batches) < CHUNK_BATCHES:
            batch, self._held = self._held, None
            if batch is None:
                batch = self._draw()
                if batch is None:
                    break  # the sampler ended
            if batches and not seen.isdisjoint(batch):
                self._held = batch
                break
            batches.append(batch)
            seen.update(batch)
        return batches

    def _draw(self):
        """The sampler's next batch, None at its end."""
        if self._custom_batches:
            batch = next(self._source, None)
            return None if batch is None else [int(i) for i in batch]
        batch = [int(i) for i in itertools.islice(self._source, self._batch_size)]
        return batch or None
