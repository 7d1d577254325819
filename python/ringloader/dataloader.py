# SPDX-License-Identifier: BSD-3-Clause
"""ringloader.DataLoader: torch.utils.data.DataLoader's signature and
behaviour, fed by ringloader's ring instead of pickled worker queues."""
import inspect
import warnings

import torch
from torch.utils.data._utils.collate import default_collate, default_convert

from ._trainer import (arguments as _arguments, device as _device, in_process as _in_process,
                       iterable as _iterable, iterable_arguments as _iterable_arguments,
                       options as _options, reconfigure as _reconfigure,
                       ring as _ring, seeding as _seeding, stream as _stream)
from ._trainer.worker_batching import worker_batching as _worker_batching
from ._ringloader import OptionError

__all__ = ["DataLoader"]


_AUTO_WORKERS = -1  # LoaderOptions::kAutoWorkers
# The most a Python dataset's batch may take in its ring slot. Virtual: a
# slot's memory is committed as batches are written into it.
_DEFAULT_MAX_BATCH_BYTES = 1 << 30


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
    * ``batch_size=None`` (unbatched loading) works for Python datasets
      (each sample through ``collate_fn``, Default: ``default_convert``, in
      the workers); ringloader.datasets make whole batches and refuse it;
    * ``seed`` (ringloader's own) keys augmentation randomness per sample;
      by default it derives from ``generator`` or torch's initial seed (0
      when sharded, so that every rank shares it). ``seeding="torch"``
      (Default: ``"ringloader"``) seeds Python workers as torch does
      instead, batches dealt round-robin, for torch's numbers line for line
      (``_trainer/seeding.py``, docs/drop_in.md).
    * a second ``iter(loader)`` starts a new epoch and supersedes the first
      iterator, which then raises ``ringloader.Error`` (with
      ``persistent_workers=True`` both are one object, as in torch).
    * a custom ``batch_sampler`` keeps its own batches (each at most its
      ``batch_size``; short ones are padded in the ring and cut back, see
      ``_batches.py``); a sampler with no ``len`` is streamed in chunks
      (``_stream.py``). Neither supports ``state_dict()``.

    Python datasets: samples and batches may be of any size and structure;
    no byte budget is asked. With the default collate, tensors, numeric
    arrays and numbers of sample 0's shapes fill the slot in place and are
    collated here as views; strings, None, other objects, and tensors of
    another shape travel pickled in a per-sample record (``max_pickled_bytes``,
    Default: sized from sample 0, see ``_batch_structure.BatchStructure``);
    a batch with a sample that outgrows its record is collated by the
    worker instead. A custom ``collate_fn`` runs in the workers, as
    torch's does, and its batch reaches the trainer through the slot
    (``_batch_codec``: tensors as views, the rest pickled). Slots are
    virtually ``max_batch_bytes`` large (Default: 1 GiB) and commit memory
    only as batches are written (``stats()["ring_resident_bytes"]``); a
    batch over it raises ``OptionError`` naming its samples and size. The
    ring is not pinned for Python datasets: ``pin_memory=True`` pins each
    batch, as torch's does. Small fields (up to 4 KiB a batch) are copied
    out of the slot, so they can be kept. An exception in ``__getitem__``
    or ``collate_fn`` is re-raised with its own type and the worker's
    traceback, as torch's.

    Distributed training: ``distributed=True`` (or an explicit ``rank`` /
    ``world_size``) gives this process a disjoint shard of one permutation
    per (seed, epoch), padded like ``DistributedSampler`` so all ranks get
    the same number of batches. Rank and world size come from the arguments,
    else the initialised ``torch.distributed`` group, else ``$RANK`` /
    ``$WORLD_SIZE``. Without shuffle the order equals
    ``DistributedSampler(shuffle=False)``'s; with shuffle the permutation is
    ringloader's own (Philox keyed by seed and epoch), not torch's generator.
    Passing a ``DistributedSampler`` as ``sampler`` works as with torch.

    ``IterableDataset`` (docs/drop_in.md): each worker runs its own
    iterator, with torch's ``get_worker_info()``, seeds, ``worker_init_fn``
    and ``collate_fn`` in the worker; batches come round-robin over the
    workers, as torch's, as views of the ring (``max_batch_bytes`` as
    above). ``num_workers=0``, DataPipes and a
    ``device`` get torch's own DataLoader (said in a warning).
    ``state_dict()`` needs a dataset with ``state_dict()`` and
    ``load_state_dict()`` (torchdata's convention).

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
    ``ring_slots=0`` holds two batches per worker (4 at least, torch's
    ``prefetch_factor=2``), fewer if they do not fit
    ``ring_memory_budget_bytes`` (Default: a quarter of physical memory).
    Every slot stays resident: ask for a deeper ring with ``ring_slots``
    or ``prefetch_factor`` when batch times vary a lot.

    ``worker_nice`` (Default: 0, the trainer's priority, as torch's
    workers have) is added to every worker's nice value: above 0 the
    trainer gets a core sooner when it wakes, and the workers yield their
    share to every other busy process (include/ringloader/options.h).
    """

    # The class DataLoader(attach=...) makes (attached.py declares it).
    _attached_class = None
    # torch's own loader in our clothes, for datasets the ring does not
    # serve (_torch_fallback.py declares it).
    _fallback_class = None

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 ring_slots=_options.default("ring_slots"), seed=None,
                 on_error=_options.default("on_error"),
                 hang_timeout=_options.default("hang_timeout_s"),
                 max_batch_retries=_options.default("max_batch_retries"),
                 distributed=False, rank=None, world_size=None,
                 native=True, max_pickled_bytes=None,
                 max_batch_bytes=_DEFAULT_MAX_BATCH_BYTES,
                 held_batches=_options.default("held_batches"),
                 device=_options.default("device"), device_normalize=None,
                 max_auto_workers=_options.default("max_auto_workers"),
                 ring_memory_budget_bytes=_options.default("ring_memory_budget_bytes"),
                 worker_nice=_options.default("worker_nice"),
                 attach=None, in_order=True, seeding="ringloader"):
        # Every argument: what _reconfigure.py builds the loader again from
        # when attributes set after construction ask for it.
        settings = {name: value for name, value in locals().items() if name != "self"}
        if attach is not None:  # only a subclass of ours gets here (see __new__)
            raise OptionError("ringloader: attach= is for ringloader.DataLoader itself")
        self._settings = settings
        if isinstance(dataset, torch.utils.data.IterableDataset):  # see _iterable.py
            self._init_iterable(settings)
        else:
            args = self._configure(settings)
            self.dataset, self.num_workers, self.timeout = dataset, num_workers, timeout
            self.batch_size, self.drop_last = args.batch_size, args.drop_last
            self.sampler, self.batch_sampler = args.sampler, args.batch_sampler
            self.pin_memory = pin_memory
            self.prefetch_factor = _arguments.prefetch_factor_read_back(prefetch_factor,
                                                                        num_workers)
            self.persistent_workers, self.generator = persistent_workers, generator
            # torch >= 2.6: False lets torch hand batches out as workers finish.
            # Batches here always come in sampler order, which in_order=False
            # allows too (docs/drop_in.md).
            self.in_order = in_order
            self.pin_memory_device = pin_memory_device  # read back as torch's
            # As torch: None means default_collate (default_convert unbatched),
            # and reads back as it.
            self.collate_fn = _default_collate(collate_fn, args.unbatched)
            self.multiprocessing_context = multiprocessing_context
            self.worker_init_fn = worker_init_fn
        # From here on torch's __setattr__ refuses dataset, batch_size,
        # sampler, batch_sampler, drop_last and persistent_workers, in its
        # words; what is set anyway (timm clears the flag) or may be set
        # (collate_fn, worker_init_fn...) counts at the next iter().
        self._settled, self._kept_iterator = _reconfigure.snapshot(self), False
        self._DataLoader__initialized = True

    def _configure(self, settings):
        """Resolves a map-style dataset's `settings` (the constructor's
        arguments) and builds the backend its epochs run on, with what the
        loader derives from them. Returns the resolved arguments
        (_arguments.resolve)."""
        s = settings
        dataset, num_workers = s["dataset"], s["num_workers"]
        _seeding.check(s.get("seeding", "ringloader"), s["seed"])
        args = _arguments.resolve(
            dataset, batch_size=s["batch_size"], shuffle=s["shuffle"], sampler=s["sampler"],
            batch_sampler=s["batch_sampler"], num_workers=num_workers,
            drop_last=s["drop_last"], timeout=s["timeout"],
            worker_init_fn=s["worker_init_fn"],
            multiprocessing_context=s["multiprocessing_context"], generator=s["generator"],
            prefetch_factor=s["prefetch_factor"], seed=s["seed"], on_error=s["on_error"],
            distributed=s["distributed"], rank=s["rank"], world_size=s["world_size"],
            native=_seeding.native_allowed(s.get("seeding", "ringloader"), s["native"]),
            batch_capacity=s.get("batch_capacity"))
        _seeding.check_source(s.get("seeding", "ringloader"),
                              _arguments.decoded_in_cpp(args.source))
        # What the ring's plan cuts: the batch sampler's batches, or one
        # sample each when unbatched (batch_size=None); the sampler whose
        # order it plans (torch's: batch_sampler.sampler).
        self._slot_batch_size, self._index_batches = args.slot_batch_size, args.index_batches
        self._order_sampler, self._unbatched = args.sampler, args.unbatched
        # The order is ringloader's own (sharded, a Mix, shards shuffled natively).
        self._own_order = args.sharded or args.mix is not None or args.native_shuffle
        self.rank, self.world_size, self.seed = args.rank, args.world_size, args.seed
        self.device = str(s["device"])
        options, to_device = self._loader_options(args, s)
        if _arguments.decoded_in_cpp(args.source):
            self._backend = _ring.CppWorkersBackend(
                args.order, args.source, options,
                args.source if args.source is not dataset else None, args.target_transform)
        elif num_workers > 0:
            collate_fn = _default_collate(s["collate_fn"], args.unbatched)
            self._backend = _ring.PythonWorkersBackend(
                args.order, dataset, options, s["worker_init_fn"], self.seed,
                s["max_pickled_bytes"], to_device,
                _worker_batching(args, collate_fn, s["max_batch_bytes"]),
                reuse=self.__dict__.get("_backend"), seeding=s.get("seeding", "ringloader"))
        else:
            self._backend = _in_process.InProcessBackend(args.order)
        return args

    def _init_iterable(self, settings):
        """An IterableDataset's loader: torch's attributes, and workers that
        each run the dataset's iterator into the ring (_iterable.py)."""
        s = settings
        batch_size, drop_last, num_workers = s["batch_size"], s["drop_last"], s["num_workers"]
        # Iterable workers are always seeded as torch's (_iterable_worker).
        _seeding.check(s["seeding"], None)
        _iterable_arguments.check_arguments(s["shuffle"], s["sampler"], s["batch_sampler"],
                                            batch_size, drop_last)
        self.dataset, self.num_workers, self.timeout = s["dataset"], num_workers, s["timeout"]
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = _iterable_arguments.samplers(batch_size, drop_last)
        self.pin_memory = s["pin_memory"]
        self.prefetch_factor = _arguments.prefetch_factor_read_back(s["prefetch_factor"],
                                                                    num_workers)
        self.persistent_workers, self.generator = s["persistent_workers"], s["generator"]
        self.in_order, self.pin_memory_device = s["in_order"], s["pin_memory_device"]
        self.collate_fn = s["collate_fn"]  # None reads back as None, as torch's here
        self.multiprocessing_context = s["multiprocessing_context"]
        self.worker_init_fn, self.device = s["worker_init_fn"], "cpu"
        self.rank, self.world_size, self.seed = 0, 1, None
        self._configure_iterable(s)

    def _configure_iterable(self, settings):
        """The IterableDataset backend of `settings`: its ring's options
        (``max_batch_bytes``: the most bytes one encoded batch may take, its
        slot's virtual size, as for a map-style dataset). Its workers read
        the dataset, collate_fn, worker_init_fn... from the loader at iter()."""
        s = settings
        _arguments.check_counts(s["num_workers"], s["timeout"], s["prefetch_factor"])
        held_batches = _options.checked_choice("held_batches", s["held_batches"])
        prefetch_factor = s["prefetch_factor"]
        options = {
            # The ring of one worker: its prefetched batches, the one the
            # trainer holds and the one it waits for.
            "ring_slots": (2 if prefetch_factor is None else int(prefetch_factor)) + 2,
            "seed": 0, "on_error": "raise", "hang_timeout_s": float(s["hang_timeout"]),
            "max_batch_retries": int(s["max_batch_retries"]), "held_batches": held_batches,
            "pin_memory": bool(s["pin_memory"]), "worker_nice": int(s["worker_nice"])}
        if s["timeout"]:
            options["timeout_s"] = float(s["timeout"])
        # torch pins batches only where CUDA is (its pin_memory thread).
        pin = bool(s["pin_memory"]) and torch.cuda.is_available()
        self._backend = _iterable.IterableBackend(s["dataset"], options,
                                                  s["max_batch_bytes"], pin, s["num_workers"])

    def _loader_options(self, args, settings):
        """The native loader's options (LoaderOptions), and the torch.device
        a Python dataset's batches are moved to in Python (or None)."""
        s = settings
        num_workers, ring_slots, prefetch_factor = (s["num_workers"], s["ring_slots"],
                                                    s["prefetch_factor"])
        auto_workers, drop_last = args.auto_workers, args.drop_last
        batch_size, sampler, dataset = self._slot_batch_size, args.sampler, s["dataset"]
        sharded, mix, shuffle = args.sharded, args.mix, args.shuffle
        native_shuffle = args.native_shuffle
        if ring_slots == 0 and prefetch_factor is not None and not auto_workers \
                and num_workers > 0:
            # torch keeps prefetch_factor batches in flight per worker, plus
            # the one the trainer holds; 2 is the automatic depth's own.
            ring_slots = max(4, num_workers * prefetch_factor, num_workers + 1)
        options = {
            "batch_size": int(batch_size),
            "num_workers": _AUTO_WORKERS if auto_workers else int(num_workers),
            "max_auto_workers": int(s["max_auto_workers"]),
            "ring_memory_budget_bytes": int(s["ring_memory_budget_bytes"]),
            "worker_nice": int(s["worker_nice"]),
            "drop_last": bool(drop_last), "seed": self.seed,
            "ring_slots": int(ring_slots),
            # Shards still being indexed have no len() yet; the loader's
            # own order needs no room beyond the dataset's.
            "max_samples_per_epoch": 0 if args.order.builtin and getattr(
                dataset, "ringloader_indexing", False) else max(
                len(dataset),
                _stream.CHUNK_BATCHES * batch_size if args.order.streamed
                # Python workers planning a sampler's order: room for a
                # streamed chunk too, so that the same workers serve a batch
                # sampler set after construction (timm's; _ring.py).
                else max(len(self._index_batches) * batch_size if args.order.custom_batches
                         else _sampler_len(sampler),
                         0 if _arguments.decoded_in_cpp(args.source) or args.order.builtin
                         else _stream.CHUNK_BATCHES * batch_size)),
            "rank": self.rank, "world_size": self.world_size,
            "shuffle": bool((sharded or mix is not None) and shuffle) or native_shuffle,
        }
        if s["timeout"]:
            options["timeout_s"] = float(s["timeout"])
        # Faults: a dead or hung (no progress on one sample for
        # hang_timeout s) worker is replaced and its batch re-done; with
        # on_error="skip" (native datasets) a bad sample is replaced by a
        # deterministic substitute, counted in stats()["skipped_samples"].
        options["on_error"] = str(s["on_error"])
        options["hang_timeout_s"] = float(s["hang_timeout"])
        options["max_batch_retries"] = int(s["max_batch_retries"])
        # Batches the caller keeps (list(loader), stored outputs) are copied
        # out of the ring once their slot is needed (stats()
        # ["spilled_batches"]); "raise" gives LeaseError instead.
        options["held_batches"] = _options.checked_choice("held_batches", s["held_batches"])
        # pin_memory page-locks the ring (CUDA is touched at the first
        # iteration, on the current device); a slot whose last tensor dies
        # then waits for the CUDA work enqueued before (a non_blocking copy).
        options["pin_memory"] = bool(s["pin_memory"]) or self.device != "cpu"
        # Python datasets' batches are moved after collation (None: not moved).
        to_device = _device.configure(self.device, s["device_normalize"],
                                      _arguments.decoded_in_cpp(args.source), options)
        return options, to_device

    def __new__(cls, *args, **kwargs):
        # DataLoader(attach="name") reads a NodeLoader's lane instead of a
        # dataset of its own: the subclass declared with attaches=True
        # (attached.py, which imports this module: hence no import here).
        if kwargs.get("attach") is not None and cls is DataLoader:
            return super().__new__(DataLoader._attached_class)
        # A dataset the ring does not serve: torch's own loader, said once.
        reason = _arguments.torch_serves(_SIGNATURE, args, kwargs)
        if reason is not None and DataLoader._fallback_class is not None:
            return super().__new__(DataLoader._fallback_class.class_for(cls, reason))
        return super().__new__(cls)

    def __init_subclass__(cls, attaches=False, torch_fallback=False, **kwargs):
        super().__init_subclass__(**kwargs)
        if attaches:
            DataLoader._attached_class = cls
        if torch_fallback:
            DataLoader._fallback_class = cls

    def __len__(self):
        if isinstance(self.dataset, torch.utils.data.IterableDataset):
            return _iterable.loader_len(self)  # torch's (TypeError without len)
        return len(self._index_batches)

    def set_epoch(self, epoch):
        """The epoch the next iteration uses (augmentation keys, and the
        epoch passed on to the sampler if it has set_epoch, like
        DistributedSampler). Without a call, each iteration advances it."""
        self._backend.set_epoch(int(epoch))
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(int(epoch))

    def __iter__(self):
        # A new epoch supersedes the iterator of the one in progress (one
        # ring serves one stream); with persistent workers torch hands out
        # the same iterator object, reset, and so do we (_ring.py).
        # Attributes set since the last iter() count from this one, as in
        # torch (_reconfigure.py).
        settings = _reconfigure.settings_for_iter(self)
        if settings is not None:
            self._rebuild(settings)
        iterator = self._backend.iterate(self)
        # torch keeps a persistent-workers iterator (its _iterator) and
        # resets it at each later iter().
        if self.persistent_workers and _reconfigure.workers(self) > 0:
            self._kept_iterator = True
        return iterator

    def _rebuild(self, settings):
        """The backend built again from `settings` (attributes set after
        construction, _reconfigure.py); the attributes stay as set."""
        old = self._backend
        if _reconfigure.is_iterable(settings):
            if _reconfigure.iterable_backend_serves(self._settings, settings):
                _arguments.check_counts(settings["num_workers"], settings["timeout"],
                                        settings["prefetch_factor"])
            else:
                self._configure_iterable(settings)
        else:
            self._configure(settings)
            self._backend.take_over(old)  # its epoch goes on
        self._settings = settings
        self._settled, self._kept_iterator = _reconfigure.snapshot(self), False

    # torch's DataLoader makes these properties that validate and read
    # private names its __init__ sets; ours keeps the value as given.
    @property
    def multiprocessing_context(self):
        return self.__dict__.get("_multiprocessing_context")

    @multiprocessing_context.setter
    def multiprocessing_context(self, value):
        # Set after construction: torch's own checks and conversion (a
        # start method's name reads back as its context), in its words.
        if self._DataLoader__initialized and not isinstance(self.num_workers, str):
            _TorchDataLoader.multiprocessing_context.fset(self, value)
            value = self.__dict__.pop("_DataLoader__multiprocessing_context")
        self.__dict__["_multiprocessing_context"] = value

    @property
    def _converted(self):
        """A torchvision dataset converted for the C++ workers (tests, benches)."""
        return self._backend.converted

    @property
    def _native(self):
        """The native loader (ring and workers) of the epochs, or None (tests
        and tools reach it for worker pids)."""
        return self._backend.native

    def state_dict(self):
        """The position between batches: the epoch in progress and how many
        of its batches were handed out (or the next epoch), the epoch's
        order when a torch sampler chose it, and the generators' states.
        Plain values and tensors, for ``torch.save``."""
        return self._backend.state_dict(self)

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
        self._backend.load_state_dict(self, state)

    def stats(self):
        """Where time went: images, wall, decode/transform/read seconds summed
        over workers, the trainer's stall waiting for data, ring size."""
        return self._backend.stats()

    def stats_text(self):
        return self._backend.stats_text()

    def worker_pids(self):
        return self._backend.worker_pids()


_SIGNATURE = inspect.signature(DataLoader.__init__)
# torch's own class (python -m ringloader later gives its name to ours).
_TorchDataLoader = DataLoader.__bases__[0]


def _default_collate(collate_fn, unbatched):
    """torch's: None means default_collate (default_convert unbatched)."""
    if collate_fn is None:
        return default_convert if unbatched else default_collate
    return collate_fn


def _sampler_len(sampler):
    try:
        return len(sampler)
    except TypeError:
        warnings.warn("ringloader: sampler has no len(); assuming dataset size")
        return 0
