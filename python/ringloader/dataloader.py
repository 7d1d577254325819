"""ringloader.DataLoader: torch.utils.data.DataLoader's signature and
behaviour, fed by ringloader's ring instead of pickled worker queues."""
import warnings

import torch
from torch.utils import dlpack as _dlpack
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate

from . import _ringloader, _state
from ._distributed import ShardSampler, resolve_rank
from ._ringloader import OptionError

__all__ = ["DataLoader"]


def _is_native(dataset):
    return hasattr(dataset, "ringloader_dataset_json")


class DataLoader:
    """Drop-in for ``torch.utils.data.DataLoader``.

    Datasets from ``ringloader.datasets`` (with ringloader or torchvision
    transforms) are decoded by spawned C++ workers straight into shared
    memory; batches arrive as tensors aliasing the ring (no copy, no pickle).
    Keep fewer than ``ring_slots`` batches alive at once (clone to keep one
    longer); otherwise ``LeaseError`` is raised instead of a deadlock.

    Arguments as torch's. Differences, all deliberate:
    * workers are always spawned and persistent (``multiprocessing_context``
      and ``persistent_workers`` are accepted; the ring is fixed memory);
    * ``worker_init_fn`` runs Python in workers, which native datasets do
      not have: it is refused for them;
    * ``batch_size=None`` (unbatched loading) is refused;
    * ``seed`` (ringloader's own) keys augmentation randomness per sample;
      by default it derives from ``generator`` or torch's initial seed (0
      when sharded, so that every rank shares it).

    Distributed training: ``distributed=True`` (or an explicit ``rank`` /
    ``world_size``) gives this process a disjoint shard of one permutation
    per (seed, epoch), padded like ``DistributedSampler`` so all ranks get
    the same number of batches. Rank and world size come from the arguments,
    else the initialised ``torch.distributed`` group, else ``$RANK`` /
    ``$WORLD_SIZE``. Without shuffle the order equals
    ``DistributedSampler(shuffle=False)``'s; with shuffle the permutation is
    ringloader's own (Philox keyed by seed and epoch), not torch's generator.
    Passing a ``DistributedSampler`` as ``sampler`` works as with torch.

    ``state_dict()`` / ``load_state_dict()`` save and restore the position
    between batches (like torchdata's StatefulDataLoader): a fresh loader
    with the same configuration goes on with the remaining batches of the
    epoch, byte for byte, then the next epochs.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 ring_slots=0, seed=None, on_error="raise", hang_timeout=120.0,
                 max_batch_retries=2, distributed=False, rank=None, world_size=None):
        if num_workers < 0:
            raise OptionError("num_workers option should be non-negative; "
                              "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise OptionError("timeout option should be non-negative")
        if prefetch_factor is not None and num_workers == 0:
            raise OptionError("prefetch_factor option could only be specified "
                              "in multiprocessing. let num_workers > 0 to "
                              "enable multiprocessing.")
        if worker_init_fn is not None and _is_native(dataset):
            raise OptionError("worker_init_fn: ringloader's native workers run "
                              "no Python, so there is nothing to initialise")
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise OptionError("ringloader.DataLoader: IterableDataset is not "
                              "supported (batches are planned by index)")
        if multiprocessing_context not in (None, "spawn", "forkserver", "fork"):
            if getattr(multiprocessing_context, "get_start_method", None) is None:
                raise OptionError(f"multiprocessing_context {multiprocessing_context!r}"
                                  " is not understood")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise OptionError("batch_sampler option is mutually exclusive "
                                  "with batch_size, shuffle, sampler, and drop_last")
            if not isinstance(batch_sampler, BatchSampler):
                raise OptionError("ringloader: batch_sampler must be a "
                                  "torch.utils.data.BatchSampler (batches of "
                                  "one fixed size fill fixed ring slots)")
            sampler, batch_size = batch_sampler.sampler, batch_sampler.batch_size
            drop_last = batch_sampler.drop_last
        elif batch_size is None:
            raise OptionError("ringloader: batch_size=None (unbatched loading) "
                              "is not supported; batches fill ring slots")
        if sampler is not None and shuffle:
            raise OptionError("sampler option is mutually exclusive with shuffle")
        if on_error not in ("raise", "skip"):
            raise OptionError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if on_error == "skip" and not _is_native(dataset):
            raise OptionError("on_error='skip' needs a ringloader.datasets dataset; "
                              "a Python dataset's __getitem__ decides what to skip")
        sharded = distributed or rank is not None or world_size is not None
        if sharded and sampler is not None:
            raise OptionError("ringloader: sampler option is mutually exclusive with "
                              "distributed / rank / world_size (a DistributedSampler "
                              "shards on its own)")
        self.rank, self.world_size = resolve_rank(distributed, rank, world_size)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.timeout = timeout
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        self.collate_fn = collate_fn
        if seed is None:
            seed = (generator.initial_seed() if generator is not None
                    else 0 if sharded else torch.initial_seed())
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        # Tar shards shuffle natively (shard order + a seeded buffer), so
        # workers read each shard front to back.
        native_shuffle = bool(shuffle) and sampler is None and getattr(
            dataset, "ringloader_native_shuffle", False)
        if sharded:
            sampler = ShardSampler(len(dataset), {
                "shuffle": bool(shuffle), "seed": self.seed, "rank": self.rank,
                "world_size": self.world_size})
        elif sampler is None:
            sampler = (RandomSampler(dataset, generator=generator)
                       if shuffle and not native_shuffle else SequentialSampler(dataset))
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        # The C++ sampler makes the order itself (no set_order per epoch).
        self._builtin_order = sharded or type(sampler) is SequentialSampler
        if ring_slots == 0 and prefetch_factor is not None:
            ring_slots = max(2, num_workers * prefetch_factor + 2)
        options = {
            "batch_size": int(batch_size), "num_workers": int(num_workers),
            "drop_last": bool(drop_last), "seed": self.seed,
            "ring_slots": int(ring_slots),
            "max_samples_per_epoch": max(len(dataset), _sampler_len(sampler)),
            "rank": self.rank, "world_size": self.world_size,
            "shuffle": bool(sharded and shuffle) or native_shuffle,
        }
        if timeout:
            options["timeout_s"] = float(timeout)
        # Faults: a dead or hung (no progress on one sample for
        # hang_timeout s) worker is replaced and its batch re-done; with
        # on_error="skip" (native datasets) a bad sample is replaced by a
        # deterministic substitute, counted in stats()["skipped_samples"].
        options["on_error"] = str(on_error)
        options["hang_timeout_s"] = float(hang_timeout)
        options["max_batch_retries"] = int(max_batch_retries)
        self._layout = None
        self._native = None
        if _is_native(dataset):
            self._native = _ringloader.NativeLoader(
                dataset.ringloader_dataset_json(), dataset.ringloader_pipeline_json(),
                options)
        elif num_workers > 0:
            self._native, self._layout = _python_dataset_loader(
                dataset, options, worker_init_fn, self.seed)
        self._epoch = 0
        self._resume = None      # a loaded state, for the next epoch started
        self._in_process = None  # the in-process iterator of the epoch in progress
        self._epoch_open = False  # an epoch started and not yet run to its end

    def __len__(self):
        return len(self.batch_sampler)

    def set_epoch(self, epoch):
        """The epoch the next iteration uses (augmentation keys, and the
        epoch passed on to the sampler if it has set_epoch, like
        DistributedSampler). Without a call, each iteration advances it."""
        self._epoch = int(epoch)
        if self._resume is not None and self._resume["epoch"] != self._epoch:
            self._resume = None  # another epoch: the saved position is moot
        if self._native is not None:
            self._native.set_epoch(self._epoch)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(int(epoch))

    def __iter__(self):
        epoch, resume = self._epoch, self._resume
        self._resume = None
        if resume is not None and resume["epoch"] != epoch:
            resume = None
        self._epoch = epoch + 1
        self._epoch_open = True
        if self._native is None:  # a Python dataset with num_workers=0
            self._in_process = _InProcessIterator(self, epoch, resume)
            return self._in_process
        if resume is None:
            # Draw from the RNG exactly as torch's iterator does (its workers'
            # base seed), so code after the loop sees the same random state.
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
            if not self._builtin_order:
                self._native.set_order([int(i) for i in self.sampler])
        # (Resuming, the native loader holds the saved order and position.)
        self._native.set_epoch(epoch)
        self._native.start_epoch()
        return _Iterator(self)

    def state_dict(self):
        """The position between batches: the epoch in progress and how many
        of its batches were handed out (or the next epoch), the epoch's
        order when a torch sampler chose it, and the generators' states.
        Plain values and tensors, for ``torch.save``."""
        if self._native is not None:
            return _state.native_state(self)
        if self._in_process is not None:
            return _state.in_process_state(self, self._in_process)
        return _state.empty_state(self, self._epoch)

    def load_state_dict(self, state):
        """Makes the next iteration go on from ``state`` (taken by
        ``state_dict()`` of a loader with the same dataset, batch size,
        drop_last, seed, rank and world size; the number of workers may
        differ): the remaining batches of the saved epoch, then the next
        epochs. An epoch the state saw to its end is skipped. ``set_epoch``
        with another epoch drops the position. Raises ValueError
        (OptionError) for a state of another configuration."""
        _state.check(self, state)
        if self._native is not None:
            self._native.load_state_dict(_state.native_dict(state))
        _state.restore_generators(self, state)
        epoch = int(state["epoch"])
        complete = state["batches_consumed"] >= state["batches_in_epoch"]
        # Between epochs there is nothing to skip: the next epoch draws its
        # order from the restored generators as it would have.
        self._resume = None if not state["in_progress"] else {
            "epoch": epoch, "batches_consumed": int(state["batches_consumed"]),
            "order": _state.order_list(state)}
        self._epoch = epoch + 1 if complete else epoch
        self._in_process = None
        self._epoch_open = False

    def stats(self):
        """Where time went: images, wall, decode/transform/read seconds summed
        over workers, the trainer's stall waiting for data, ring size."""
        return self._native.stats() if self._native else {}

    def stats_text(self):
        return self._native.stats_text() if self._native else ""

    def worker_pids(self):
        return self._native.worker_pids() if self._native else []


class _Iterator:
    def __init__(self, loader):
        self._loader = loader
        self._native = loader._native

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        batch = self._native.next()
        if batch is None:
            self._loader._epoch_open = False
            raise StopIteration
        data = _dlpack.from_dlpack(batch[0])
        collate = self._loader.collate_fn
        layout = self._loader._layout
        if layout is not None:
            count = len(batch[4])
            size = self._loader.batch_size
            if collate is None or collate is default_collate:
                return layout.collate(data, size, count)
            return collate([layout.sample(data, size, i) for i in range(count)])
        target = _dlpack.from_dlpack(batch[1])
        if collate is None or collate is default_collate:
            return [data, target]
        # Documented fallback: a custom collate_fn sees per-sample views.
        return collate([(data[i], target[i]) for i in range(data.shape[0])])


class _InProcessIterator:
    """num_workers=0 with a Python dataset: torch's own semantics, in process.
    The epoch's order is drawn up front (as torch's samplers draw it at the
    first batch) so that state_dict() can carry it."""

    def __init__(self, loader, epoch, resume):
        self._loader = loader
        self.epoch = epoch
        if resume is not None and resume["order"] is not None:
            self.order = resume["order"]
        elif isinstance(loader.sampler, ShardSampler):
            self.order = loader.sampler.order(epoch)
        else:
            self.order = [int(i) for i in loader.sampler]
        size = loader.batch_size
        self.batches = [self.order[i:i + size] for i in range(0, len(self.order), size)]
        if loader.drop_last and self.batches and len(self.batches[-1]) < size:
            self.batches.pop()
        self.consumed = 0 if resume is None else min(resume["batches_consumed"],
                                                     len(self.batches))

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.batches)

    def __next__(self):
        if self.consumed >= len(self.batches):
            if self._loader._in_process is self:
                self._loader._in_process = None
                self._loader._epoch_open = False
            raise StopIteration
        indices = self.batches[self.consumed]
        self.consumed += 1
        collate = self._loader.collate_fn or default_collate
        return collate([self._loader.dataset[i] for i in indices])


def _python_dataset_loader(dataset, options, worker_init_fn, seed):
    """Spawned Python workers running dataset[i] into the ring."""
    import os
    import pickle
    import sys

    from ._layout import Layout
    layout = Layout(dataset[0])
    main = sys.modules.get("__main__")
    header = {"sys_path": list(sys.path),
              "main_path": getattr(main, "__file__", None)}
    payload = {"dataset": dataset, "layout": layout, "worker_init_fn": worker_init_fn,
               "seed": seed, "num_workers": options["num_workers"],
               "batch_size": options["batch_size"]}
    try:
        blob = pickle.dumps({"header": pickle.dumps(header),
                             "payload": pickle.dumps(payload)})
    except Exception as error:
        raise OptionError(f"ringloader: the dataset must be picklable to reach "
                          f"spawned workers (as with multiprocessing 'spawn'): "
                          f"{error}") from error
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-c",
               f"import sys; sys.path.insert(0, {package_parent!r}); "
               "from ringloader._worker import main; sys.exit(main(sys.argv[1:]))"]
    native = _ringloader.NativeLoader.external(command, blob, len(dataset),
                                               layout.sample_bytes, options)
    return native, layout


def _sampler_len(sampler):
    try:
        return len(sampler)
    except TypeError:
        warnings.warn("ringloader: sampler has no len(); assuming dataset size")
        return 0
