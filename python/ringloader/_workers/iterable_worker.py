# SPDX-License-Identifier: BSD-3-Clause
"""An IterableDataset's worker: runs its own iterator, as torch's worker
does, and writes each collated batch into its ring slot (_batch_codec).

Each worker has a native loader of its own (_iterable.py), so every task
it is handed means "your next batch": the sample indices are dummies. The
task's epoch says which iteration and which chunk of it (a streamed order,
see _iterable.CHUNK_TASKS); a new iteration (persistent workers' next
epoch) starts a new iterator, as torch's ``_ResumeIteration`` does.

torch's semantics, from torch's own code where it exists: the seeds and
``get_worker_info()`` of ``_worker_loop``, ``worker_init_fn`` whose
exception is raised at the first batch, and ``_IterableDatasetFetcher``
(batching, ``drop_last``, ``collate_fn`` in the worker). The end of the
stream is a batch of its own, ``END``.

An iterator cannot be replayed: a worker restarted by the pool (the one
before died or hung) that is handed anything but the first task of an
iteration fails it, naming the worker, rather than repeat or skip batches.
"""
import os
import time
import traceback

from ringloader._workers import dataset_bytes as _dataset_bytes
from ringloader._workers.torch_seeding import seed_worker

# Tasks per chunk of one iteration's streamed order; a task's epoch is
# iteration * CHUNK_SPAN + chunk.
CHUNK_SPAN = 1 << 20


class EndOfStream:
    """The batch a worker publishes once its iterator is exhausted."""

    def __reduce__(self):
        return (_end, ())


def _end():
    return END


END = EndOfStream()


class Snapshot:
    """A batch with the dataset's ``state_dict()`` taken right after it
    (torchdata's convention): what a saved position resumes each worker's
    stream from."""

    def __init__(self, batch, state):
        self.batch, self.state = batch, state


class _Stream:
    """One worker's iterations of the dataset (torch's worker loop)."""

    def __init__(self, config):
        # The server's memfd of later epochs' configurations (non-persistent
        # workers kept across epochs: _stream_renewal).
        self.renewal_fd = config.get("renewal_fd")
        self.heartbeat = None  # the endpoint's, once it exists
        self.iteration = None
        self._configure(config)

    def _configure(self, config):
        """A new worker's start, as torch's _worker_loop: seeds, worker
        info, worker_init_fn, the position to resume, a new iterator."""
        from torch.utils.data._utils import worker as torch_worker
        self.config = stream = config["iterable"]
        self.worker_id = stream["worker_id"]
        self.fetcher = self.init_error = self.dataset = None
        self.ended = False
        try:  # this worker's own copy (its server left it as bytes)
            # In the configuration too, in place of its bytes: they are
            # not kept beside the copy.
            self.dataset = config["dataset"] = _dataset_bytes.materialized(config["dataset"])
        except Exception as error:  # noqa: BLE001  (raised at the first batch)
            self.init_error = (error, traceback.format_exc())
        # To try again (begin()) where it did not unpickle.
        self._unpickle_failed_in = config if self.dataset is None else None
        seed = seed_worker(stream["base_seed"], self.worker_id)
        torch_worker._worker_info = torch_worker.WorkerInfo(
            id=self.worker_id, num_workers=stream["num_workers"], seed=seed,
            dataset=self.dataset)
        if self.init_error is not None:
            return
        try:
            if stream["worker_init_fn"] is not None:
                stream["worker_init_fn"](self.worker_id)
            if stream.get("resume") is not None:  # a saved position (torchdata's way)
                self.dataset.load_state_dict(stream["resume"])
            self._new_fetcher()
        except Exception as error:  # noqa: BLE001  (raised at the first batch, as torch)
            self.init_error = (error, traceback.format_exc())

    def _new_fetcher(self):
        from torch.utils.data._utils.fetch import _IterableDatasetFetcher
        stream = self.config
        self.ended = False
        self.fetcher = _IterableDatasetFetcher(
            self.dataset, stream["batch_size"] is not None,
            _private_output(stream["collate_fn"]), stream["drop_last"])
        self.fetcher.dataset_iter = _Beating(self.fetcher.dataset_iter, self)

    def begin(self, iteration):
        """The iteration a task belongs to. A later one starts over from its
        renewal when the trainer stored one (a non-persistent loader's
        epoch), else restarts the iterator (a persistent one's)."""
        if self.iteration is not None and iteration <= self.iteration:
            return
        first, self.iteration = self.iteration is None, iteration
        renewal = None
        if iteration > 0 and self.renewal_fd is not None:
            from ringloader._workers import stream_renewal
            renewal = stream_renewal.load(self.renewal_fd, iteration)
        if renewal is not None:
            self._configure(renewal)
        elif not first and self._unpickle_failed_in is not None:
            # Its copy did not unpickle (raised at that iteration's first
            # batch): a persistent worker tries again, as from its start.
            self._configure(self._unpickle_failed_in)
        elif not first and self.init_error is None:
            self._new_fetcher()

    def next_batch(self):
        """The next collated batch, or END."""
        if self.init_error is not None:
            error, self.init_error = self.init_error, None
            raise error[0]
        if self.ended:
            return END
        size = self.config["batch_size"]
        try:
            batch = self.fetcher.fetch(None if size is None else [None] * size)
        except StopIteration:
            self.ended = True
            return END
        if self.config.get("stateful"):
            return Snapshot(batch, self.dataset.state_dict())
        return batch


class _Beating:
    """The dataset's iterator, with a heartbeat before each item: the pool
    judges a worker hung after hang_timeout seconds on one item (as on one
    sample of a map-style dataset), not on one whole batch."""

    def __init__(self, iterator, stream):
        self.iterator, self.stream, self.items = iterator, stream, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.stream.heartbeat is not None:
            self.stream.heartbeat(self.items)
        self.items += 1
        return next(self.iterator)


def _private_output(collate_fn):
    """torch's own collates stack into shared memory when they see
    get_worker_info() (for torch's queue); the slot is shared already, so
    they run without it here (a copy into the slot instead of a shm file,
    its page faults and its unmap per batch). Other collates see it."""
    from torch.utils.data._utils import collate
    from torch.utils.data._utils import worker as torch_worker
    if collate_fn not in (collate.default_collate, collate.default_convert):
        return collate_fn

    def private(data):
        info, torch_worker._worker_info = torch_worker._worker_info, None
        try:
            return collate_fn(data)
        finally:
            torch_worker._worker_info = info
    return private


def _restarted_message(worker_id, chunk, index):
    return (f"ringloader: IterableDataset worker {worker_id} (pid {os.getpid()}) was "
            f"restarted after the one before it died or hung, and was handed batch "
            f"{chunk * CHUNK_SPAN + index} of its stream: an iterator cannot be "
            f"replayed, so going on would repeat or skip batches. Start a new epoch "
            f"with iter(loader)")


class _FirstBatch:
    """A worker's first batch (iteration 0), made before its first task:
    what making it raised is raised at that task, as it would have been."""

    def __init__(self, stream):
        self._batch = self._error = None
        try:
            stream.begin(0)
            self._batch = stream.next_batch()
        except Exception as error:  # noqa: BLE001  (raised at the first task)
            self._error = error

    def take(self):
        error, self._error = self._error, None
        if error is not None:
            raise error
        batch, self._batch = self._batch, None
        return batch


def serve(index, server_pid, config, ring_fd):
    """Worker `config["iterable"]["worker_id"]`'s life (`index` is its slot
    in its own one-worker pool): fills batches until the trainer shuts down."""
    from ringloader import _ringloader
    _single_threaded_torch(config)
    stream = _Stream(config)
    endpoint = _ringloader.WorkerEndpoint(ring_fd, index, server_pid)
    stream.heartbeat = endpoint.heartbeat
    return _serve_tasks(stream, endpoint, None)


def serve_spare(config, assignment):
    """A spare's life (_worker_fork) once it has its payload: it makes its
    first batch at once, while the trainer sets up its native loader and
    starts the stub, rather than after the stub's handshake (a fresh
    worker's first task is always its stream's first batch). It attaches
    to the ring at the first item after its stub's descriptors come
    (`assignment.attach(block)`: (index, server pid, ring fd), or None
    while they have not), so from then on each item beats as any
    worker's does; then it serves."""
    from ringloader import _ringloader
    _single_threaded_torch(config)
    stream = _Stream(config)
    endpoint = None

    def attach(block):
        nonlocal endpoint
        place = assignment.attach(block)
        if place is not None:
            endpoint = _ringloader.WorkerEndpoint(place[2], place[0], place[1])
            stream.heartbeat = endpoint.heartbeat

    def beat_or_attach(item):
        attach(block=False)
        if endpoint is not None:
            endpoint.heartbeat(item)

    stream.heartbeat = beat_or_attach
    first = _FirstBatch(stream)
    if endpoint is None:
        attach(block=True)
    return _serve_tasks(stream, endpoint, first)


def _single_threaded_torch(config):
    """As torch's workers, one intra-op thread; and below the trainer."""
    import torch
    from ringloader._workers.priority import yield_to_trainer
    yield_to_trainer(config)
    torch.set_num_threads(1)


def _serve_tasks(stream, endpoint, first):
    """Fills batches until the trainer shuts down; `first`: a _FirstBatch
    made before the first task (serve_spare)."""
    from ringloader._exceptions import failure_message
    worker_id, fresh = stream.worker_id, True
    while True:
        task = endpoint.next_task()
        if task is None:
            return 0
        iteration, chunk = divmod(task.epoch, CHUNK_SPAN)
        started = time.perf_counter()
        try:
            if fresh and (chunk, task.index) != (0, 0):
                raise RuntimeError(_restarted_message(worker_id, chunk, task.index))
            fresh = False
            made, first = first, None
            if made is not None and iteration == 0:
                batch = made.take()
            else:
                stream.begin(iteration)
                endpoint.heartbeat(task.index)
                batch = END if iteration < stream.iteration else stream.next_batch()
            slot = endpoint.slot(task)
            try:
                _encode(batch, slot, worker_id)
            finally:
                del slot
        except Exception as error:  # noqa: BLE001  (re-raised in the trainer with its type)
            endpoint.fail(task, -1, failure_message(
                error, traceback.format_exc(), worker_id, None, task.batch_id))
            continue
        endpoint.add_times(0.0, time.perf_counter() - started)
        endpoint.publish(task)


def _encode(batch, slot, worker_id):
    """Into the slot: virtually max_batch_bytes large, its pages committed
    as written and given back when a later batch is much smaller (the
    codec's release_tail), so no batch needs a byte budget below the cap."""
    from ringloader._slots import batch_codec as _batch_codec
    from ringloader._ringloader import OptionError
    try:
        _batch_codec.encode_into(batch, slot)
    except _batch_codec.TooBig as error:
        raise OptionError(
            f"ringloader: IterableDataset worker {worker_id}: a batch needs at least "
            f"{error.needed} bytes in its ring slot, over the {error.capacity} bytes "
            f"of DataLoader(max_batch_bytes=...); raise it") from None
