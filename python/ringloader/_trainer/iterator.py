# SPDX-License-Identifier: BSD-3-Clause
"""The iterators over a native loader (the ring backends of _ring.py): each
hands out an epoch's batches, finished (cut, collated, moved), and keeps
Ctrl-C from losing or skipping one. ``CppWorkersIterator`` serves datasets
the C++ workers decode, ``PythonWorkersIterator`` Python datasets' workers.

Ctrl-C (any signal handler's exception) and then going on with the same
iterator loses nothing: during the wait, and while the batch is being taken,
the native loader raises it with nothing taken (python/native/module.cc puts
the batch back); while the batch is being finished here, the batch is put
back too. One instant is left: between the native call's return and its
result reaching this code, where Python raises the signal's exception and
drops the result. That is noticed (the native loader counts what it handed
out) and the iterator then raises on every later next() instead of skipping
the batch silently. Once ``__next__`` has returned, the batch is the
caller's, as any function's result."""
from torch.utils.data._utils.collate import default_collate

from ringloader import _exceptions, _ringloader
from ringloader._trainer import device as _device
from ringloader._slots import batch_codec as _batch_codec
from ringloader._slots import collate as _collate
from ringloader._ringloader import Error, WorkerError


class RingIterator:
    """One epoch at a time of a ring backend. `backend.generation` counts
    the epochs it started: an iterator of an older one was superseded."""

    # How the backend's batches are finished (_finish): set by the subclasses.
    _batch_structure = None  # a Python dataset's sample layout in the slot
    _converted = None        # a torchvision / tensor dataset converted for the C++ workers
    _target_transform = None
    _to_device = None        # where a Python dataset's batches go, or None
    _records = None          # Python workers' exception records (_exceptions.WorkerRecords)

    def __init__(self, loader, backend):
        self._loader, self._backend = loader, backend

    def restart(self, native, stream, batch_lengths, done):
        """Starts the epoch the backend just planned in `native` (or in
        `stream`, a streamed one); `done`: it has no batch at all."""
        self._generation, self._done, self._open = self._backend.generation, done, True
        self._native, self._stream, self._batch_lengths = native, stream, batch_lengths
        # Ctrl-C bookkeeping (_take): batches the native loader has handed
        # out that reached this iterator, and why it cannot go on, if so.
        self._received = self._native.batches_handed_out()
        self._lost, self._last = None, None

    @property
    def in_progress(self):
        """The epoch was started, and neither run to its end nor closed."""
        return self._open

    def close_epoch(self):
        """A loaded state replaced the position: the epoch no longer counts
        as in progress for state_dict()."""
        self._open = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        raw = self._take()
        # A signal's exception (Ctrl-C) while the batch is being finished
        # gives it back: the same iterator's next next() finishes it again,
        # so going on after KeyboardInterrupt loses nothing. Other errors
        # (a collate_fn's) consume the batch, as torch's do.
        try:
            batch = self._finish(raw)
            device = self._to_device
            return batch if device is None else _device.move_to(batch, device)
        except BaseException as error:
            if not isinstance(error, Exception):
                self._native.put_back(raw)
                self._received -= 1
            raise

    def _take(self):
        """The next raw batch tuple from the native loader (StopIteration at
        the epoch's end). A signal during the wait, or as the batch is taken,
        is raised with nothing taken (module.cc puts the batch back). Only a
        signal in the instant between the native call's return and its
        result reaching us drops the batch (Python raises it first): that is
        noticed here, and this iterator then refuses to go on, since going on
        would silently skip that batch."""
        if self._done:
            raise StopIteration  # again and again, as torch's iterator
        if self._generation != self._backend.generation:
            raise Error("ringloader: this iterator's epoch was superseded by a later "
                        "iter(loader) on the same loader (one ring serves one stream; "
                        "torch's non-persistent workers would have gone on with it): "
                        "keep one iterator per loader at a time")
        if self._lost is not None:
            raise Error(self._lost)
        try:
            batch = self._native.next()
        except WorkerError as error:
            # A Python dataset's exception comes back with its own type.
            raise _exceptions.from_worker(error, self._records) from None
        except BaseException:
            self._check_lost()
            raise
        if batch is None:
            stream = self._stream
            if stream is not None and stream.start_next():
                self._batch_lengths = stream.batch_lengths
                return self._take()  # the sampler's next chunk
            self._done, self._open = True, False
            raise StopIteration
        self._received += 1
        self._last = (batch.epoch, batch.index)
        return batch

    def _check_lost(self):
        if self._native.batches_handed_out() == self._received:
            return  # nothing was taken
        self._lost = _exceptions.dropped_by_signal(
            self._last, "start a new epoch with iter(loader), or restore a "
            "state_dict() saved before")

    def _finish(self, batch):
        """The batch the caller gets from the native Batch (data, target,
        epoch, index, sample_indices): cut to a custom batch's length,
        collated, targets copied out of the slot."""
        data = batch.data  # shares the C++ storage: a spill moves it too
        # A custom batch sampler's batch is padded to batch_size: keep its own.
        lengths = self._batch_lengths
        length = None if lengths is None else lengths[batch.index]
        collate = self._loader.collate_fn
        layout = self._batch_structure
        if layout is not None:
            return self._finish_python(batch, data, layout, length, collate)
        data = data[:length]
        target = _collate.copy_if_small(batch.target[:length])
        if self._converted is not None:  # a torchvision or tensor dataset: its own samples
            return self._converted.finish(data, target, collate, self._target_transform)
        if collate is None or collate is default_collate:
            return [data, target]
        # Documented fallback: a custom collate_fn sees per-sample views.
        return collate([(data[i], target[i]) for i in range(data.shape[0])])


    def _finish_python(self, batch, data, layout, length, collate):
        """A Python dataset's batch: encoded by its worker (collated there),
        or laid out per sample for the default collate here. The raw
        storage is trimmed to what the batch uses first, so a spill copies
        that, not the slot's virtual size."""
        start = self._encoded_start
        if _batch_codec.is_encoded(data, start):
            _ringloader.trim_storage(data, _batch_codec.encoded_end(data, start))
            out = _batch_codec.decode(data, start)
            if self._backend.collate_in_trainer:  # the samples: collate them here
                out = collate(out)  # (padding made no sample)
        else:
            # (The header stays inside: a batch put back after Ctrl-C is
            # finished again, and reads it.)
            _ringloader.trim_storage(data, start + _batch_codec.HEADER_BYTES)
            size, indices = self._loader._slot_batch_size, batch.sample_indices[:length]
            if collate is None or collate is default_collate:
                out = _collate.collate_batch(layout, data, size, indices,
                                             f"batch {batch.index} of epoch {batch.epoch}")
            else:  # collate_fn set after the workers started: collated here
                out = collate(_collate.samples(layout, data, size, len(indices)))
        return _pinned(out) if self._pin else out


def _pinned(batch):
    from torch.utils.data._utils.pin_memory import pin_memory
    return pin_memory(batch)


class CppWorkersIterator(RingIterator):
    """A dataset the C++ workers decode: batches come out as [data, target],
    or as a converted torchvision dataset's own samples would collate."""

    def __init__(self, loader, backend, converted, target_transform):
        super().__init__(loader, backend)
        self._converted, self._target_transform = converted, target_transform


class PythonWorkersIterator(RingIterator):
    """A Python dataset's workers: batches are collated from the slot laid
    out by `batch_structure`, then moved to `to_device` (if not None)."""

    def __init__(self, loader, backend, to_device):
        super().__init__(loader, backend)
        self._to_device = to_device

    def restart(self, native, stream, batch_lengths, done):
        # The workers restart with the dataset as it is at iter() (_ring.py):
        # its structure may have changed.
        self._batch_structure = self._backend.batch_structure
        self._encoded_start = self._backend.encoded_start
        self._records = self._backend.worker_records
        # The ring is not pinned for Python datasets (its slots are
        # virtually large): pin_memory pins each batch, as torch's does.
        import torch
        self._pin = bool(self._loader.pin_memory) and self._to_device is None \
            and torch.cuda.is_available()
        super().restart(native, stream, batch_lengths, done)
