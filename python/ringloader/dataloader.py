"""ringloader.DataLoader: torch.utils.data.DataLoader's signature and
behaviour, fed by ringloader's ring instead of pickled worker queues."""
import warnings

import torch
from torch.utils import dlpack as _dlpack
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate

from . import _ringloader
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
      by default it derives from ``generator`` or torch's initial seed.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 ring_slots=0, seed=None):
        if not _is_native(dataset):
            raise OptionError(
                f"ringloader.DataLoader: {type(dataset).__name__} is not a "
                "ringloader dataset; use ringloader.datasets (ImageFolder, "
                "FileList, IdxDataset, FashionMNIST)")
        if num_workers < 0:
            raise OptionError("num_workers option should be non-negative; "
                              "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise OptionError("timeout option should be non-negative")
        if prefetch_factor is not None and num_workers == 0:
            raise OptionError("prefetch_factor option could only be specified "
                              "in multiprocessing. let num_workers > 0 to "
                              "enable multiprocessing.")
        if worker_init_fn is not None:
            raise OptionError("worker_init_fn: ringloader's native workers run "
                              "no Python, so there is nothing to initialise")
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
        if sampler is None:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self._sequential = type(sampler) is SequentialSampler
        if seed is None:
            seed = generator.initial_seed() if generator is not None else torch.initial_seed()
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        if ring_slots == 0 and prefetch_factor is not None:
            ring_slots = max(2, num_workers * prefetch_factor + 2)
        options = {
            "batch_size": int(batch_size), "num_workers": int(num_workers),
            "drop_last": bool(drop_last), "seed": self.seed,
            "ring_slots": int(ring_slots),
            "max_samples_per_epoch": max(len(dataset), _sampler_len(sampler)),
        }
        if timeout:
            options["timeout_s"] = float(timeout)
        self._native = _ringloader.NativeLoader(dataset.ringloader_dataset_json(),
                                                dataset.ringloader_pipeline_json(),
                                                options)
        self._epoch = 0

    def __len__(self):
        return len(self.batch_sampler)

    def __iter__(self):
        # Draw from the RNG exactly as torch's iterator does (its workers'
        # base seed), so code after the loop sees the same random state.
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        if not self._sequential:
            self._native.set_order([int(i) for i in self.sampler])
        self._native.set_epoch(self._epoch)
        self._epoch += 1
        self._native.start_epoch()
        return _Iterator(self)

    def stats(self):
        """Where time went: images, wall, decode/transform/read seconds summed
        over workers, the trainer's stall waiting for data, ring size."""
        return self._native.stats()

    def stats_text(self):
        return self._native.stats_text()

    def worker_pids(self):
        return self._native.worker_pids()


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
            raise StopIteration
        data = _dlpack.from_dlpack(batch[0])
        target = _dlpack.from_dlpack(batch[1])
        collate = self._loader.collate_fn
        if collate is None or collate is default_collate:
            return [data, target]
        # Documented fallback: a custom collate_fn sees per-sample views.
        return collate([(data[i], target[i]) for i in range(data.shape[0])])


def _sampler_len(sampler):
    try:
        return len(sampler)
    except TypeError:
        warnings.warn("ringloader: sampler has no len(); assuming dataset size")
        return 0
