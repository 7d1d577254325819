# SPDX-License-Identifier: BSD-3-Clause
"""ringloader.DataLoader: torch.utils.data.DataLoader's signature and
behaviour, fed by ringloader's ring instead of pickled worker queues."""
import warnings

import torch
from torch.utils import dlpack as _dlpack
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate

from . import (_batches, _device, _in_process, _iterator, _native_datasets,
               _python_workers, _ringloader, _state, _stream)
from ._distributed import ShardSampler, resolve_rank
from ._ringloader import OptionError

__all__ = ["DataLoader"]


_AUTO_WORKERS = -1  # LoaderOptions::kAutoWorkers


def _is_native(dataset):
    return hasattr(dataset, "ringloader_dataset_json")


class DataLoader(torch.utils.data.DataLoader):
    """Drop-in for ``torch.utils.data.DataLoader``.

    A subclass of torch's DataLoader for ``isinstance`` checks (frameworks
    such as Lightning make them), built by its own ``__init__``: none of
    torch's iterator machinery is used.

    Datasets from ``ringloader.datasets`` (with ringloader or torchvision
    transforms) are decoded by spawned C++ workers straight into shared
    memory; batches arrive as tensors aliasing the ring (no copy, no pickle).
    Batches you keep (``list(loader)``, stored outputs) just work: when the
    ring needs the slot of a batch still alive, that batch is copied once
    into private memory (its tensors and views follow; counted in
    ``stats()["spilled_batches"]``). A loop that drops its batches copies
    nothing. ``held_batches="raise"`` raises ``LeaseError`` instead. A kept
    batch must not be read by another thread while ``next()`` runs.
    ``device="cuda"`` / ``"cuda:N"`` hands out batches on that GPU.

    Arguments as torch's. Differences, all deliberate:
    * Python datasets' workers are forked from a clean zygote made at
      ``import ringloader``, never from the trainer later on, whatever
      ``multiprocessing_context`` says (accepted); workers never run the
      main script (``__main__``'s classes travel by value, cloudpickle).
      ``dataset[0]`` is probed in a worker at construction (it sizes the
      ring), so an error there is raised by the constructor. With
      ``persistent_workers=False`` a dataset changed between epochs
      restarts the workers, as torch's re-created ones see it; native
      datasets' workers are always persistent;
    * ``worker_init_fn`` runs Python in workers, which native datasets do
      not have: it is refused for them;
    * ``batch_size=None`` (unbatched loading) is refused;
    * ``seed`` (ringloader's own) keys augmentation randomness per sample;
      by default it derives from ``generator`` or torch's initial seed (0
      when sharded, so that every rank shares it).
    * a second ``iter(loader)`` starts a new epoch and supersedes the first
      iterator, which then raises ``ringloader.Error`` (with
      ``persistent_workers=True`` both are one object, as in torch).
    * a custom ``batch_sampler`` keeps its own batches (each at most its
      ``batch_size``; short ones are padded in the ring and cut back, see
      ``_batches.py``); a sampler with no ``len`` is streamed in chunks
      (``_stream.py``). Neither supports ``state_dict()``.

    Python datasets: samples may hold anything ``default_collate`` takes.
    Tensors, numeric arrays and numbers of sample 0's shapes fill the slot
    in place; strings, None, other objects, and tensors of another shape
    travel pickled, at most ``max_pickled_bytes`` per sample (Default:
    sized from sample 0, see ``_batch_structure.BatchStructure``). Small fields (up to
    4 KiB a batch) are copied out of the slot, so they can be kept. An
    exception in ``__getitem__`` is re-raised with its own type and the
    worker's traceback, as torch's.

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

    ``num_workers="auto"`` (native datasets) lets the loader choose: it
    starts with one worker and adds one while the trainer waits for batches
    and cores are idle, until another worker no longer raises throughput
    (at most ``max_auto_workers``, Default: the cores). Decisions go to
    stderr and ``stats()["autotune_decisions"]``; ``stats()["workers"]`` is
    the count now. Batches are the same bytes whatever the count.
    ``ring_slots=0`` sizes the ring from the batch's bytes within
    ``ring_memory_budget_bytes`` (Default: a quarter of physical memory).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 ring_slots=0, seed=None, on_error="raise", hang_timeout=120.0,
                 max_batch_retries=2, distributed=False, rank=None, world_size=None,
                 native=True, max_pickled_bytes=None, held_batches="spill",
                 device="cpu", device_normalize=None, max_auto_workers=0,
                 ring_memory_budget_bytes=0, attach=None, in_order=True):
        if attach is not None:  # only a subclass of ours gets here (see __new__)
            raise OptionError("ringloader: attach= is for ringloader.DataLoader itself")
        auto_workers = isinstance(num_workers, str) and num_workers == "auto"
        if isinstance(num_workers, str) and not auto_workers:
            raise OptionError(f"num_workers must be an int or 'auto', got {num_workers!r}")
        if not auto_workers and num_workers < 0:
            raise OptionError("num_workers option should be non-negative; "
                              "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise OptionError("timeout option should be non-negative")
        if auto_workers and prefetch_factor is not None:
            raise OptionError("prefetch_factor sizes the ring per worker; with "
                              "num_workers='auto' use ring_slots or "
                              "ring_memory_budget_bytes")
        if prefetch_factor is not None and num_workers == 0:
            raise OptionError("prefetch_factor option could only be specified "
                              "in multiprocessing. let num_workers > 0 to "
                              "enable multiprocessing.")
        # A torchvision dataset whose samples the C++ workers can make runs
        # natively by itself (``native=False`` keeps Python workers).
        source, self._target_transform = dataset, None
        if native and not _is_native(dataset):
            converted, self._target_transform = _native_datasets.convert(
                dataset, worker_init_fn)
            source = converted if converted is not None else dataset
        self._converted = source is not dataset
        self._source = source  # (owns the memfds a converted dataset reads)
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
            if _batches.is_custom(batch_sampler):  # its own batches, as torch
                batch_size = _batches.capacity(batch_sampler)
                sampler = getattr(batch_sampler, "sampler", None)
            else:
                sampler, batch_size = batch_sampler.sampler, batch_sampler.batch_size
                drop_last = batch_sampler.drop_last
        elif batch_size is None:
            raise OptionError("ringloader: batch_size=None (unbatched loading) "
                              "is not supported; batches fill ring slots")
        if sampler is not None and shuffle:
            raise OptionError("sampler option is mutually exclusive with shuffle")
        if on_error not in ("raise", "skip"):
            raise OptionError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if auto_workers and not _is_native(source):
            raise OptionError("ringloader: num_workers='auto' needs a dataset the native "
                              "workers load (ringloader.datasets, or a torchvision "
                              "dataset that converts); give a number for Python datasets")
        if on_error == "skip" and not _is_native(source):
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
        # torch >= 2.6: False lets torch hand batches out as workers finish.
        # Batches here always come in sampler order, which in_order=False
        # allows too (docs/drop_in.md).
        self.in_order = in_order
        self.pin_memory_device = pin_memory_device  # read back as torch's; pinning is per device
        self.generator = generator
        # As torch: None means default_collate, and reads back as it.
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.multiprocessing_context = multiprocessing_context
        self.worker_init_fn = worker_init_fn
        if seed is None:
            seed = (generator.initial_seed() if generator is not None
                    else 0 if sharded else torch.initial_seed())
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        # Tar shards shuffle natively (shard order + a seeded buffer), so
        # workers read each shard front to back.
        native_shuffle = bool(shuffle) and sampler is None and getattr(
            source, "ringloader_native_shuffle", False)
        # A weighted mix draws each epoch in the C++ sampler (datasets.Mix).
        mix = getattr(dataset, "ringloader_mix", None)
        if mix is not None and sampler is not None:
            raise OptionError("ringloader: a datasets.Mix draws its own order; "
                              "sampler must stay None")
        if sharded or mix is not None:
            sampler = ShardSampler(len(dataset), {
                "shuffle": bool(shuffle), "seed": self.seed, "rank": self.rank,
                "world_size": self.world_size}, mix=mix,
                batching={"batch_size": int(batch_size), "drop_last": bool(drop_last)})
        elif sampler is None:
            sampler = (RandomSampler(dataset, generator=generator)
                       if shuffle and not native_shuffle else SequentialSampler(dataset))
        self.sampler = sampler
        self._custom_batches = batch_sampler is not None and _batches.is_custom(batch_sampler)
        self.batch_sampler = (batch_sampler if self._custom_batches
                              else BatchSampler(sampler, batch_size, drop_last))
        self._batch_lengths = None  # the custom batches' own lengths, this epoch
        # The C++ sampler makes the order itself (no set_order per epoch).
        self._builtin_order = (sharded or mix is not None
                               or type(sampler) is SequentialSampler) \
            and not self._custom_batches
        # A sampler with no len (an endless generator) is drawn chunk by chunk.
        self._streamed = not self._builtin_order and not _stream.has_len(self.batch_sampler)
        self._stream = None
        if ring_slots == 0 and prefetch_factor is not None:
            ring_slots = max(2, num_workers * prefetch_factor + 2)
        options = {
            "batch_size": int(batch_size),
            "num_workers": _AUTO_WORKERS if auto_workers else int(num_workers),
            "max_auto_workers": int(max_auto_workers),
            "ring_memory_budget_bytes": int(ring_memory_budget_bytes),
            "drop_last": bool(drop_last), "seed": self.seed,
            "ring_slots": int(ring_slots),
            "max_samples_per_epoch": max(
                len(dataset),
                _stream.CHUNK_BATCHES * batch_size if self._streamed
                else len(self.batch_sampler) * batch_size if self._custom_batches
                else _sampler_len(sampler)),
            "rank": self.rank, "world_size": self.world_size,
            "shuffle": bool((sharded or mix is not None) and shuffle) or native_shuffle,
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
        # Batches the caller keeps (list(loader), stored outputs) are copied
        # out of the ring once their slot is needed (stats()
        # ["spilled_batches"]); "raise" gives LeaseError instead.
        if held_batches not in ("spill", "raise"):
            raise OptionError(f"held_batches must be 'spill' or 'raise', got {held_batches!r}")
        options["held_batches"] = held_batches
        # pin_memory page-locks the ring (CUDA is touched at the first
        # iteration, on the current device); a slot whose last tensor dies
        # then waits for the CUDA work enqueued before (a non_blocking copy).
        options["pin_memory"] = bool(pin_memory) or str(device) != "cpu"
        self.device = str(device)
        # Python datasets' batches are moved after collation (None: not moved).
        self._to_device = _device.configure(self.device, device_normalize,
                                            _is_native(source), options)
        self._batch_structure = None
        self._native = None
        self._workers = None  # Python workers (a Python dataset, num_workers > 0)
        if _is_native(source):
            self._native = _ringloader.NativeLoader(
                source.ringloader_dataset_json(), source.ringloader_pipeline_json(),
                options)
        elif num_workers > 0:
            self._workers = _python_workers.PythonWorkers(
                dataset, options, worker_init_fn, self.seed, max_pickled_bytes)
            self._native, self._batch_structure = self._workers.native, self._workers.layout
        self._epoch = 0
        self._resume = None      # a loaded state, for the next epoch started
        self._in_process = None  # the in-process iterator of the epoch in progress
        self._epoch_open = False  # an epoch started and not yet run to its end

    def __new__(cls, *args, **kwargs):
        # DataLoader(attach="name") reads a NodeLoader's lane instead of a
        # dataset of its own (node.py).
        if kwargs.get("attach") is not None and cls is DataLoader:
            from .node import AttachedDataLoader
            return super().__new__(AttachedDataLoader)
        return super().__new__(cls)

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

    def _draw_base_seed(self):
        """Draws from the RNG exactly as torch's iterator does at iter() (its
        workers' base seed, drawn for num_workers=0 too), so the sampler's
        draw and code after the loop see the same random state as torch's."""
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)

    def __iter__(self):
        epoch, resume = self._epoch, self._resume
        self._resume = None
        if resume is not None and resume["epoch"] != epoch:
            resume = None
        self._epoch = epoch + 1
        self._epoch_open = True
        if self._native is None:  # a Python dataset with num_workers=0
            if resume is None:
                self._draw_base_seed()
            self._in_process = _in_process.InProcessIterator(self, epoch, resume)
            return self._in_process
        if resume is None and self._workers is not None and (
                not self.persistent_workers or not self._workers.iterated):
            # torch's workers start at iter() (each epoch unless persistent)
            # and see the dataset as it is then.
            self._native = None
            self._native, self._batch_structure = self._workers.refresh(self.dataset)
        if resume is None:
            self._draw_base_seed()
            if self._custom_batches and not self._streamed:
                order, self._batch_lengths = _batches.padded_order(
                    self.batch_sampler, self.batch_size)
                self._native.set_order(order)
            elif not self._builtin_order and not self._streamed:
                self._native.set_order([int(i) for i in self.sampler])
        # (Resuming, the native loader holds the saved order and position.)
        self._stream = _stream.OrderStream(self, epoch) if self._streamed else None
        if self._stream is None:
            self._native.set_epoch(epoch)
            self._native.start_epoch()
        ended = self._stream is not None and not self._stream.start_next()
        # A new epoch supersedes the iterator of the one in progress (one ring
        # serves one stream). With persistent workers torch hands out the
        # same iterator object, reset; so do we.
        self._generation = getattr(self, "_generation", 0) + 1
        held = getattr(self, "_iterator", None)
        if self.persistent_workers and held is not None:
            held._restart(self._generation)
        else:
            self._iterator = _iterator.Iterator(self, self._generation)
        self._iterator._done = ended  # an endless sampler that yielded nothing
        return self._iterator

    # torch's DataLoader makes these properties that validate and read
    # private names its __init__ sets; ours keeps the value as given.
    @property
    def multiprocessing_context(self):
        return self.__dict__.get("_multiprocessing_context")

    @multiprocessing_context.setter
    def multiprocessing_context(self, value):
        self.__dict__["_multiprocessing_context"] = value

    def state_dict(self):
        """The position between batches: the epoch in progress and how many
        of its batches were handed out (or the next epoch), the epoch's
        order when a torch sampler chose it, and the generators' states.
        Plain values and tensors, for ``torch.save``."""
        if self._custom_batches or self._streamed:
            raise OptionError("ringloader: state_dict() does not support a custom "
                              "batch_sampler or a sampler with no len (their batches "
                              "are not saved)")
        if self._native is not None:
            return _state.native_state(self)
        if self._in_process is not None:
            return _state.in_process_state(self, self._in_process)
        return _state.empty_state(self, self._epoch)

    def load_state_dict(self, state):
        """Makes the next iteration go on from ``state`` (taken by
        ``state_dict()`` of a loader with the same dataset, batch size,
        drop_last and seed; the number of workers may differ): the
        remaining batches of the saved epoch, then the next epochs. An
        epoch the state saw to its end is skipped. ``set_epoch`` with
        another epoch drops the position. Raises ValueError (OptionError)
        for a state of another configuration.

        ``state`` may also be a list: the states of all ranks of the job
        that saved them. A state (or list) from another world size resumes
        elastically (native loader, built-in order): this rank's share of
        the samples no rank consumed, then this world size's epochs (see
        docs/distributed.md)."""
        if isinstance(state, (list, tuple)):
            state = _state.merge(self, state)
        _state.check(self, state)
        if self._native is not None:
            self._native.load_state_dict(_state.native_dict(state))
        _state.restore_generators(self, state)
        epoch = int(state["epoch"])
        complete = state["batches_consumed"] >= state["batches_in_epoch"]
        # Between epochs there is nothing to skip: the next epoch draws its
        # order from the restored generators as it would have.
        self._resume = None if not state["in_progress"] else (
            _state.in_process_resume(self, state) if self._native is None else {
                "epoch": epoch, "batches_consumed": int(state["batches_consumed"]),
                "order": _state.order_list(state)})
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


def _sampler_len(sampler):
    try:
        return len(sampler)
    except TypeError:
        warnings.warn("ringloader: sampler has no len(); assuming dataset size")
        return 0
