# SPDX-License-Identifier: BSD-3-Clause
"""An IterableDataset through the ring, with torch's semantics.

Each of the ``num_workers`` workers runs its own iterator
(_iterable_worker.py), with ``get_worker_info()``, seeds and
``worker_init_fn`` as torch's, collates in the worker and encodes the batch
into a ring slot (_batch_codec); the trainer decodes it, tensors as views
of the slot (no copy). A batch belongs to the worker that made it, so each
worker has a native loader of its own (one-worker pool, its own ring): its
tasks are an endless streamed order of dummy indices, each meaning "your
next batch", planned CHUNK_TASKS at a time. The trainer takes batches
round-robin over the workers, skipping those whose stream ended, which is
torch's order (``_MultiProcessingDataLoaderIter._next_data``).

Workers are torch's: re-created at each ``iter()`` (a new base seed drawn
from the loader's generator, the dataset as it is then), or kept with
``persistent_workers`` (seeded once, a new iterator per epoch). They
start side by side, each in a thread of its own; iter() does not wait for
them (the iterator waits for each at its first batch). Their servers are
forked when the loader is built (from the trainer, so they have its
modules), else by the loader's own zygote (_warm_zygote.py).

What torch's own loader serves instead (_torch_fallback.py, see
iterable_arguments.fallback_reason): ``num_workers=0``, DataPipes, a
``device``; torch's other rules for its arguments are there too."""
import functools
import pickle
import weakref

import torch
from torch.utils.data._utils.collate import default_collate, default_convert

from ringloader import _exceptions
from ringloader._trainer import python_workers as _python_workers
from ringloader._trainer.iterable_arguments import loader_len
from ringloader._trainer import warm_zygote as _warm_zygote
from ringloader._trainer import zygote_process as _zygote_process
from ringloader._slots import batch_codec as _batch_codec
from ringloader._workers import dataset_bytes as _dataset_bytes
from ringloader._workers import stream_renewal as _stream_renewal
from ringloader._workers import frames as _frames
from ringloader._workers.iterable_worker import CHUNK_SPAN, END, EndOfStream, Snapshot
from ringloader import _ringloader
from ringloader._ringloader import Error, OptionError, WorkerError

CHUNK_TASKS = 4096
# A slot's virtual size must fit an off_t and the address space.
_MAX_BATCH_BYTES = 1 << 40


def _stateful(dataset):
    return callable(getattr(dataset, "state_dict", None)) and \
        callable(getattr(dataset, "load_state_dict", None))


def _check_stateful(dataset):
    if not _stateful(dataset):
        raise OptionError(
            "ringloader: state_dict() needs an IterableDataset with state_dict() and "
            "load_state_dict() (torchdata's convention): its position lives in each "
            "worker's iterator, which cannot be saved or replayed otherwise")


class _PickledOnce:
    """A dataset pickled once for all the workers of an iter(): each
    worker unpickles these bytes (_workers/dataset_bytes.py; its server
    does not), so each still gets a fresh copy, as torch's workers do."""

    def __init__(self, data):
        self.data = data

    def __reduce__(self):
        return (_dataset_bytes.loads, (self.data,))


def _pickled_once(dataset):
    """`dataset` pickled now, or None where it cannot be (each worker's own
    pickling then refuses it, saying why)."""
    import cloudpickle
    try:
        return _PickledOnce(cloudpickle.dumps(dataset))
    except Exception:  # noqa: BLE001  (see above)
        return None


class _StreamWorker(_python_workers.PythonWorkers):
    """One worker's loader server and native loader: a one-worker pool over
    one dummy index; a slot holds one encoded batch of up to max_batch_bytes
    (virtually: pages are committed as written)."""

    early = None  # its _warm_zygote.EarlyServer, at the loader's first iter()
    starting = None  # (_warm_zygote.Starts, its index) until its start is known done

    def __init__(self, dataset, options, stream, loader_zygote, pickled=None):
        """Pickles `dataset` as it is now (`pickled`: _pickled_once's copy
        of it); start() starts the worker (in a thread of its own:
        _warm_zygote.Starts), started() waits for that."""
        # PythonWorkers' fields, set here: its __init__ probes dataset[0].
        self.options, self.max_pickled_bytes, self.iterated = options, None, True
        self._stream_zygote, self._dataset = loader_zygote, dataset
        self.batching = {"padded": False, "max_batch_bytes": stream["max_batch_bytes"]}
        self.extra = {"worker_init_fn": None, "seed": 0, "num_workers": 1,
                      "batch_size": 1, "iterable": stream,
                      "worker_nice": options.get("worker_nice", 0)}
        self.native = self.batch_structure = self.server = None
        self.encoded_start = 0
        self.payload = self._pickle(pickled or dataset)

    def renew(self, iteration, stream, dataset, pickled=None):
        """This worker's process goes on to `iteration` as a new worker of
        torch's would: `dataset` as it is now, `stream`'s seed, its
        worker_init_fn run again (_stream_renewal). False when its server
        cannot take it (gone, or slow past the workers' start timeout):
        new workers are started instead."""
        self.extra["iterable"] = stream
        payload = self._pickle(pickled or dataset)  # refused here, as for new workers
        try:
            self.server.settimeout(self.start_bound_s() or None)
            self.server.sendall(b"N")
            _frames.send_frame(self.server, _stream_renewal.frame(iteration, payload))
            return self.server.recv(1) == b"K"
        except OSError:  # TimeoutError included
            return False

    def start(self):
        self._start(self._dataset)
        self._dataset = None

    def started(self):
        """Waits for its start (in the background since iter(), in a thread
        of _warm_zygote.Starts); raises what the start raised, at each call."""
        if self.starting is not None:
            starts, index = self.starting
            starts.wait(index)
            self.starting = None

    def start_succeeded(self):
        """Waits for its start; whether it can serve. (Ctrl-C while it
        waits is raised: only what the start raised means False.)"""
        try:
            self.started()
        except Exception:  # noqa: BLE001  (raised at the next() that met it)
            return False
        return self.native is not None

    def fork_server(self):
        """The server forked when the loader was built
        (_warm_zygote.EarlyServer), else one forked now (_fresh_server)."""
        early, self.early = self.early, None
        if early is not None:
            try:
                self._forked = early.take()
                return
            except (OSError, EOFError, WorkerError):
                pass
        super().fork_server()

    def _fresh_server(self, records_fd):
        # From the loader's zygote (made now if need be), which has the
        # trainer's modules: the trainer's would import them again.
        self.zygote = self._stream_zygote.get(self.payload)
        return super()._fresh_server(records_fd)

    def _plan_size(self, dataset):
        return 1

    def _geometry(self, batch_structure):
        # Never pinned whole: pinning would commit the virtual slots.
        return (_batch_codec.slot_bytes(0, self.batching["max_batch_bytes"]),
                dict(self.options, pin_memory=False))

    def plan(self, iteration, chunk):
        """Starts `chunk` of `iteration`: CHUNK_TASKS more batches to make."""
        self.native.set_order([0] * CHUNK_TASKS)
        self.native.set_epoch(iteration * CHUNK_SPAN + chunk)
        self.native.start_epoch()


def _start_and_plan(worker):
    worker.start()
    worker.plan(0, 0)


class IterableBackend:
    """The workers of a loader over an IterableDataset, kept across epochs
    when persistent; one iterator per epoch (the same object, reset, when
    persistent, as torch's)."""

    in_ring = True
    converted = False

    def __init__(self, dataset, options, max_batch_bytes, pin, num_workers=0):
        self._dataset, self._pin = dataset, pin
        if not 1 <= int(max_batch_bytes) <= _MAX_BATCH_BYTES:
            raise OptionError(f"ringloader: max_batch_bytes must be in [1, "
                              f"{_MAX_BATCH_BYTES}], got {max_batch_bytes}")
        self._max_batch_bytes = int(max_batch_bytes)
        self._options = dict(options, batch_size=1, num_workers=1, drop_last=False,
                             shuffle=False, max_samples_per_epoch=CHUNK_TASKS)
        self._workers = None
        self._iterator = None
        # Its first iter()'s servers, forked from the trainer now, while that
        # is more likely safe than at iter() (no CUDA yet): see _warm_zygote.
        self._early = _warm_zygote.fork_servers(num_workers)
        weakref.finalize(self, _warm_zygote.close_servers, self._early)
        # The zygote of later servers (the first ones' where the trainer
        # could not be forked): made when one is needed.
        self._zygote = _warm_zygote.LoaderZygote()
        self.generation = 0   # iter() calls: an iterator of an older one is stale
        self._iteration = 0   # of the workers kept (persistent, or renewed)
        self._resume = None   # a loaded position, for the next iter()

    @property
    def native(self):
        return None

    def iterate(self, loader):
        self.generation += 1
        resume, self._resume = self._resume, None
        planned = False
        if self._workers is not None and \
                not all(worker.start_succeeded() for worker in self._workers):
            self._workers = None  # its start failed (raised at next()): new ones
        if self._workers is not None and resume is None and loader.persistent_workers:
            self._iteration += 1
        else:
            # torch's iterator draws its workers' base seed at creation.
            base_seed = torch.empty((), dtype=torch.int64).random_(
                generator=loader.generator).item()
            renewed = self._workers is not None and resume is None and \
                self._renew(loader, base_seed)
            if not renewed:
                self._workers = None  # the old servers end before new ones start
                self._workers = self._start(loader, resume, base_seed)
                self._iteration, planned = 0, True
        if not planned:
            for worker in self._workers:
                worker.plan(self._iteration, 0)
        if not (loader.persistent_workers and self._iterator is not None):
            self._iterator = IterableIterator(loader, self, self._pin)
        self._iterator.restart(self._workers, self._iteration, resume)
        return self._iterator

    def _streams(self, loader, resume, base_seed):
        """Each worker's configuration, from the loader as it is now."""
        collate = loader.collate_fn
        if collate is None:
            collate = default_collate if loader.batch_size is not None else default_convert
        return [{"worker_id": worker_id, "num_workers": loader.num_workers,
                 "base_seed": base_seed, "worker_init_fn": loader.worker_init_fn,
                 "collate_fn": collate, "batch_size": loader.batch_size,
                 "drop_last": loader.drop_last, "max_batch_bytes": self._max_batch_bytes,
                 "stateful": _stateful(loader.dataset),
                 "resume": None if resume is None else resume["worker_states"][worker_id]}
                for worker_id in range(loader.num_workers)]

    def _renew(self, loader, base_seed):
        """A non-persistent loader's next epoch in the processes of the last
        one (_stream_renewal): what torch's new workers would get, without
        starting processes. False when they cannot take it."""
        if len(self._workers) != loader.num_workers:
            return False
        iteration = self._iteration + 1
        pickled = _pickled_once(loader.dataset)
        for worker, stream in zip(self._workers, self._streams(loader, None, base_seed)):
            if not worker.renew(iteration, stream, loader.dataset, pickled):
                return False
        self._iteration = iteration
        return True

    def _start(self, loader, resume, base_seed):
        _zygote_process.reap_servers()
        pickled = _pickled_once(loader.dataset)
        workers = [_StreamWorker(loader.dataset, self._options, stream, self._zygote, pickled)
                   for stream in self._streams(loader, resume, base_seed)]
        for worker in workers:
            worker.early = self._early.pop(0) if self._early else None
        _warm_zygote.close_servers(self._early)  # more than this iter()'s workers
        if any(worker.early is None for worker in workers):
            # Their servers come from the loader's zygote: made here, in the
            # trainer's own thread, where forking the trainer may be safe.
            # From a start thread it never is (this thread runs on).
            self._zygote.get(workers[0].payload)
        # Each worker's first chunk is planned as soon as it has started: a
        # worker that waited for the others' start waited for its first task.
        starts = _warm_zygote.Starts(
            [functools.partial(_start_and_plan, worker) for worker in workers],
            [worker.fork_server for worker in workers])
        for index, worker in enumerate(workers):
            worker.starting = (starts, index)
        return workers

    def epoch_ended(self, loader):
        """Nothing ends: a non-persistent loader's processes idle until the
        next iter() renews them (or the loader goes)."""

    def set_epoch(self, epoch):
        """Passed on to the dataset if it has set_epoch (WebDataset, Hugging
        Face streaming): workers started by the next iter() see it
        (persistent ones keep the copy they started with, as torch's)."""
        if hasattr(self._dataset, "set_epoch"):
            self._dataset.set_epoch(epoch)

    def state_dict(self, loader):
        """The position between batches, for a dataset with state_dict() and
        load_state_dict() (torchdata's convention): each worker's dataset
        state after the last batch taken from it, and the round-robin turn."""
        _check_stateful(loader.dataset)
        state = {"iterable_dataset": True, "num_workers": loader.num_workers,
                 "in_progress": False}
        if self._iterator is not None and self._iterator.in_progress:
            state.update(self._iterator.position(), in_progress=True)
        return state

    def load_state_dict(self, loader, state):
        """The next iter() goes on from `state` (state_dict() of a loader with
        the same dataset and number of workers), with new workers."""
        _check_stateful(loader.dataset)
        if not isinstance(state, dict) or not state.get("iterable_dataset"):
            raise OptionError("ringloader: not the state_dict() of a loader over an "
                              "IterableDataset")
        if state["num_workers"] != loader.num_workers:
            raise OptionError(f"ringloader: the state was saved with num_workers="
                              f"{state['num_workers']}, this loader has "
                              f"{loader.num_workers}: an IterableDataset's streams are "
                              f"per worker")
        self._resume = state if state["in_progress"] else None
        self._workers = None if state["in_progress"] else self._workers

    def _started_workers(self):
        return [worker for worker in self._workers or [] if worker.start_succeeded()]

    def stats(self):
        workers = self._started_workers()
        return {"iterable_workers": [worker.native.stats() for worker in workers]}

    def stats_text(self):
        workers = self._started_workers()
        return "\n".join(f"worker {n}: {worker.native.stats_text()}"
                         for n, worker in enumerate(workers))

    def worker_pids(self):
        workers = self._started_workers()
        return [pid for worker in workers for pid in worker.native.worker_pids()]


class IterableIterator:
    """One epoch: batches round-robin over the workers, skipping those whose
    stream ended; StopIteration once all have."""

    def __init__(self, loader, backend, pin):
        self._loader, self._backend, self._pin = loader, backend, pin

    def restart(self, workers, iteration, resume=None):
        self._workers, self._iteration = list(workers), iteration
        self._generation = self._backend.generation
        self._active = list(range(len(workers)))  # workers whose stream goes on
        self._chunks = [0] * len(workers)
        self._turn = 0
        self._done = False
        self._states = [None] * len(workers)  # each dataset's after its last batch
        if resume is not None:
            self._active, self._turn = list(resume["active"]), int(resume["turn"])
            self._states = list(resume["worker_states"])
        # Ctrl-C bookkeeping, as _iterator.RingIterator's: batches each
        # native loader handed out that reached us (counted from each
        # worker's first batch of the epoch: its start may be under way),
        # and why we cannot go on.
        self._received = [None] * len(workers)
        self._lost = None

    def __iter__(self):
        return self

    def __len__(self):
        return loader_len(self._loader)

    @property
    def in_progress(self):
        return not self._done

    def position(self):
        return {"worker_states": list(self._states), "active": list(self._active),
                "turn": self._turn}

    def __next__(self):
        if self._done:
            raise StopIteration  # again and again, as torch's iterator
        if self._generation != self._backend.generation:
            raise Error("ringloader: this iterator's epoch was superseded by a later "
                        "iter(loader) on the same loader: keep one iterator per loader")
        if self._lost is not None:
            raise Error(self._lost)
        while self._active:
            position = self._turn % len(self._active)
            try:
                batch = self._take(self._active[position])
            except Exception:
                # As torch: a failed task uses up its worker's turn, and the
                # next next() asks the next worker. (A signal's exception,
                # Ctrl-C, took nothing: the same worker's turn stays.)
                self._turn = position + 1
                raise
            if batch is END:
                del self._active[position]
                self._turn = position  # the next worker has moved into it
                continue
            self._turn = position + 1
            if self._pin:  # as torch's pin_memory thread does, here
                from torch.utils.data._utils.pin_memory import pin_memory
                return pin_memory(batch)
            return batch
        self._done, self._workers = True, []
        self._backend.epoch_ended(self._loader)
        raise StopIteration

    def _take(self, worker_id):
        """Worker `worker_id`'s next batch, or END."""
        worker = self._workers[worker_id]
        if self._received[worker_id] is None:
            self._received[worker_id] = self._started(worker_id)
        while True:
            try:
                raw = worker.native.next()
            except WorkerError as error:
                # The iterator's (or collate_fn's) exception, with its own type.
                raise _exceptions.from_worker(error, worker.records) from None
            except BaseException:
                # A signal (Ctrl-C) in the instant after the native call
                # returned drops its batch: going on would skip it.
                if worker.native.batches_handed_out() != self._received[worker_id]:
                    self._lost = _exceptions.dropped_by_signal(
                        (self._iteration, f"{self._received[worker_id]} of worker {worker_id}"),
                        "start a new epoch with iter(loader)")
                raise
            if raw is not None:
                break
            # This chunk of the worker's endless order is used up: the next.
            self._chunks[worker_id] += 1
            worker.plan(self._iteration, self._chunks[worker_id])
        self._received[worker_id] += 1
        try:
            slot = raw.data.reshape(-1)
            # The slot is virtually max_batch_bytes large: its storage is cut
            # to what the batch uses (header included, so a batch put back is
            # read again), so a kept batch's spill copies that only.
            _ringloader.trim_storage(slot, _batch_codec.encoded_end(slot))
            batch = _batch_codec.decode(slot)
        except BaseException as error:
            if not isinstance(error, Exception):  # Ctrl-C: the next next() has it
                worker.native.put_back(raw)
                self._received[worker_id] -= 1
            raise
        if isinstance(batch, Snapshot):
            self._states[worker_id] = batch.state
            batch = batch.batch
        return END if isinstance(batch, EndOfStream) else batch

    def _started(self, worker_id):
        """Waits for the worker's start; the batches it handed out so far.
        A start that failed raises its error here, and ends the epoch."""
        worker = self._workers[worker_id]
        try:
            worker.started()
        except Exception:
            self._lost = (f"ringloader: IterableDataset worker {worker_id} could not start "
                          f"(raised above): start a new epoch with iter(loader)")
            raise
        return worker.native.batches_handed_out()
