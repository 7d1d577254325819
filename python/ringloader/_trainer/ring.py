# SPDX-License-Identifier: BSD-3-Clause
"""The backends whose epochs run through a native loader (the C++ Loader:
ring, worker pool, plan): C++ workers, and Python workers (_backend.py).

A new iter() supersedes the iterator of the epoch in progress (one ring
serves one stream): its next next() raises. With persistent workers torch
hands out the same iterator object, reset; so do these."""
from ringloader import _ringloader
from ringloader._trainer import batches as _batches
from ringloader._trainer import python_workers as _python_workers
from ringloader._trainer import state as _state
from ringloader._trainer import stream as _stream
from ringloader._trainer import warm_zygote as _warm_zygote
from ringloader._trainer.backend import Backend, draw_base_seed
from ringloader._trainer.iterator import CppWorkersIterator, PythonWorkersIterator


class RingBackend(Backend):
    in_ring = True

    def __init__(self, order):
        super().__init__(order)
        self.generation = 0    # epochs started; an iterator of an older one is stale
        self._iterator = None  # the latest epoch's

    def iterate(self, loader):
        epoch, resume = self._next_epoch()
        # torch draws its workers' base seed when it makes an iterator,
        # before its workers start; a persistent one is made once and then
        # reset (no draw), which shifts a generator's later draws (the
        # sampler's order).
        new_iterator = not (loader.persistent_workers and self._iterator is not None)
        base_seed = None
        if resume is None and new_iterator:
            base_seed = draw_base_seed(loader.generator)
        native = self._native_for_epoch(loader, resume, base_seed)
        batch_lengths = None
        if resume is None:
            if self.order.custom_batches and not self.order.streamed:
                order, batch_lengths = _batches.padded_order(
                    loader._index_batches, loader._slot_batch_size, self.padding_index(loader))
                native.set_order(order)
            elif not self.order.builtin and not self.order.streamed:
                native.set_order([int(i) for i in loader._order_sampler])
        # (Resuming, the native loader holds the saved order and position.)
        stream = None
        if self.order.streamed:
            source = (loader._index_batches if self.order.custom_batches
                      else loader._order_sampler)
            stream = _stream.OrderStream(source, self.order.custom_batches,
                                         loader._slot_batch_size, native, epoch,
                                         self.padding_index(loader))
        else:
            native.set_epoch(epoch)
            native.start_epoch()
        # An endless sampler that yielded nothing has no batch at all.
        done = stream is not None and not stream.start_next()
        if stream is not None:
            batch_lengths = stream.batch_lengths
        self.generation += 1
        if new_iterator:
            self._iterator = self._new_iterator(loader)
        self._iterator.restart(native, stream, batch_lengths, done)
        return self._iterator

    def _native_for_epoch(self, loader, resume, base_seed):
        """The native loader of the epoch iter() starts; `base_seed`: the
        one drawn as torch draws its workers' (None when no iterator is
        made: persistent workers, or a loaded state's epoch)."""
        return self.native

    def padding_index(self, loader):
        """What pads a custom batch sampler's short batches: None repeats
        the batch's last index (the C++ workers make every sample)."""
        return None

    def _state(self, loader):
        in_progress = self._iterator is not None and self._iterator.in_progress
        return _state.native_state(loader, self.native, in_progress)

    def _resume_at(self, loader, state):
        return {"epoch": int(state["epoch"]),
                "batches_consumed": int(state["batches_consumed"]),
                "order": _state.order_list(state)}

    def _close_epoch(self):
        if self._iterator is not None:
            self._iterator.close_epoch()


class CppWorkersBackend(RingBackend):
    """A dataset the C++ workers decode: `source` (ringloader.datasets, or
    `converted`: the conversion of a torchvision or tensor dataset, which
    owns the memfds it reads, else None); its workers persist for the
    loader's life."""

    def __init__(self, order, source, options, converted, target_transform):
        super().__init__(order)
        self._source = source
        self._converted, self._target_transform = converted, target_transform
        # A handle when the source has one (TarShards still indexing has no
        # description to give yet).
        handle = getattr(source, "ringloader_dataset_handle", None)
        self._native = _ringloader.NativeLoader(
            handle() if handle else source.ringloader_dataset_json(),
            source.ringloader_pipeline_json(), options)

    @property
    def native(self):
        return self._native

    def _native_for_epoch(self, loader, resume, base_seed):
        if hasattr(self._converted, "warn_if_changed"):
            self._converted.warn_if_changed()
        return self._native

    @property
    def converted(self):
        return self._converted

    def _new_iterator(self, loader):
        return CppWorkersIterator(loader, self, self._converted, self._target_transform)


class PythonWorkersBackend(RingBackend):
    """A Python dataset with workers: a loader server forked from the zygote
    and its native loader (_python_workers.py). Without persistent workers,
    each iter() restarts them if the dataset changed, as torch's re-created
    workers see it. With seeding="torch" workers start at iter(), seeded
    from the base seed drawn there (_seeding.py)."""

    def __init__(self, order, dataset, options, worker_init_fn, seed, max_pickled_bytes,
                 to_device, batching, reuse=None, seeding="ringloader"):
        super().__init__(order)
        self._to_device = to_device
        # Workers planned by a sampler's order are ready for a custom batch
        # sampler's padding: one set after construction (timm's endless
        # one) then needs no new workers. The C++ sampler's order (builtin)
        # plans over the dataset's indices only, so it has none.
        batching = dict(batching, padded=not order.builtin)
        self._config = {"dataset": dataset, "options": dict(options),
                        "worker_init_fn": worker_init_fn, "seed": seed,
                        "max_pickled_bytes": max_pickled_bytes, "to_device": to_device,
                        "batching": batching, "seeding": seeding}
        if isinstance(reuse, PythonWorkersBackend) and reuse._reusable(
                self._config, order.custom_batches):
            # The same workers, planned anew: the old backend's iterators
            # are superseded (they would read this ring).
            reuse.generation += 1
            self._workers = reuse._workers
            return
        # Servers forked by a zygote of the loader's own (a fork of the
        # trainer, taken while safe) import none of the modules the trainer
        # imported after ringloader again: `datasets` cost ~2 s a loader.
        self._workers = _python_workers.PythonWorkers(
            dataset, options, worker_init_fn, seed, max_pickled_bytes, batching, seeding,
            _warm_zygote.LoaderZygote())

    def _reusable(self, config, custom_batches):
        """These workers serve `config` (attributes set after construction
        changed only the order). A custom batch sampler's batches are all
        padded to full size: drop_last then cuts nothing."""
        mine, theirs = dict(self._config), dict(config)
        if custom_batches:
            mine["options"] = dict(mine["options"], drop_last=None)
            theirs["options"] = dict(theirs["options"], drop_last=None)
        return mine.pop("dataset") is theirs.pop("dataset") and mine == theirs

    def padding_index(self, loader):
        # len(dataset): workers make no sample for it (_worker._BatchFiller).
        return len(loader.dataset)

    @property
    def collate_in_trainer(self):
        """collate_fn could not be pickled: workers hand out samples."""
        return self._workers.batching["collate_in_trainer"]

    @property
    def encoded_start(self):
        """Where a slot's encoded batch starts (_batch_codec)."""
        return self._workers.encoded_start

    @property
    def native(self):
        return self._workers.native

    @property
    def worker_records(self):
        """Where the workers' exceptions come back (_exceptions.WorkerRecords)."""
        return self._workers.records

    @property
    def batch_structure(self):
        """How sample 0 (of the dataset as the workers last loaded it) lies
        in a slot (_batch_structure.py)."""
        return self._workers.batch_structure

    def _native_for_epoch(self, loader, resume, base_seed):
        if self._workers.seeding == "torch":
            # Fresh workers wherever torch makes them, seeded from this
            # iterator's base seed (a resumed epoch draws one now).
            if base_seed is None and self._workers.native is None:
                base_seed = draw_base_seed(loader.generator)
            if base_seed is not None:
                self._workers.restart(loader.dataset, base_seed)
            return self._workers.native
        if resume is None and (not loader.persistent_workers or not self._workers.iterated):
            # torch's workers start at iter() (each epoch unless persistent)
            # and see the dataset as it is then.
            self._workers.refresh(loader.dataset)
        return self._workers.native

    def _new_iterator(self, loader):
        return PythonWorkersIterator(loader, self, self._to_device)
