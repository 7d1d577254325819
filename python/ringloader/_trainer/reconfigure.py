# SPDX-License-Identifier: BSD-3-Clause
"""Attributes set on a DataLoader after construction count from the next
``iter()``, as in torch, whose iterator reads them from the loader when it
is made (``_BaseDataLoaderIter.__init__``).

torch's ``__setattr__`` refuses ``dataset``, ``batch_size``, ``sampler``,
``batch_sampler``, ``drop_last`` and ``persistent_workers`` once the loader
is built (ours inherits it); clients set them anyway by clearing
``_DataLoader__initialized`` (timm's MultiEpochsDataLoader replaces
``batch_sampler`` with an endless one) and torch then honours them. The
rest may be set freely (Lightning sets ``worker_init_fn`` for
``seed_everything(workers=True)``).

A ringloader loader fixes its ring, workers and plan at construction, so at
``iter()`` an attribute that changed since then rebuilds the backend from
the loader's attributes, with what torch would read: the batches come from
``batch_sampler`` (its ``sampler`` when it is torch's BatchSampler), else
from ``sampler`` one sample at a time; ``batch_size`` and ``drop_last``
alone change nothing for a map-style dataset, as in torch. Like torch, a
persistent-workers iterator already made keeps what it was made with.
Rebuilding costs one start of the workers (a Python dataset's: a fork of
the zygote and the probe of sample 0)."""
import warnings

import torch

from ringloader._trainer import arguments as _arguments
from ringloader._ringloader import OptionError

# What torch's iterator reads from the loader when it is made.
# (pin_memory_device and in_order are read back only: pinning follows the
# device, and batches always come in order, which in_order=False allows.)
WATCHED = ("dataset", "batch_size", "sampler", "batch_sampler", "drop_last", "num_workers",
           "collate_fn", "worker_init_fn", "generator", "pin_memory", "timeout",
           "prefetch_factor", "persistent_workers", "multiprocessing_context")
# Of those, what decides the order of the batches.
_ORDER = ("sampler", "batch_sampler", "batch_size", "drop_last")


def snapshot(loader):
    """The attributes as the backend is built with them."""
    return {name: getattr(loader, name) for name in WATCHED}


def settings_for_iter(loader):
    """The settings (the constructor's arguments) to build `loader`'s
    backend again from at this iter(), or None to keep it: nothing changed
    since it was built, or torch would reset its persistent iterator."""
    settled = loader.__dict__.get("_settled")
    if settled is None:  # a subclass with its own __init__ (attached.py)
        return None
    changed = {name for name in WATCHED if not _same(getattr(loader, name), settled[name])}
    if not changed:
        return None
    if loader.persistent_workers and workers(loader) > 0 and loader._kept_iterator:
        return None  # torch resets the iterator it has: it reads none of them
    changed = _native_worker_init_fn(loader, changed)
    if not changed:
        return None
    settings = _settings_now(loader, changed)
    if is_iterable(loader._settings) or is_iterable(settings):
        _check_iterable(loader, settings)
    return settings


# What an IterableDataset's backend fixes when it is built (its ring's
# options, its dataset's set_epoch); the rest (collate_fn, worker_init_fn,
# batch_size, generator, num_workers...) it reads from the loader at each
# iter() (_iterable.py), so a change there needs no new backend, whose
# start would fork its first servers again.
_ITERABLE_BACKEND = ("dataset", "timeout", "prefetch_factor", "pin_memory", "held_batches",
                     "hang_timeout", "max_batch_retries", "max_batch_bytes")


def iterable_backend_serves(built, settings):
    """The IterableDataset backend built from settings `built` serves
    `settings` as it is."""
    return all(_same(built.get(name), settings.get(name)) for name in _ITERABLE_BACKEND)


def _same(a, b):
    if a is b:
        return True
    plain = (bool, int, float, str)
    return isinstance(a, plain) and type(a) is type(b) and a == b


def workers(loader):
    """num_workers, as a number ("auto" starts with one)."""
    workers = loader.num_workers
    return 1 if isinstance(workers, str) else workers  # "auto"


def is_iterable(settings):
    return isinstance(settings["dataset"], torch.utils.data.IterableDataset)


def _native_worker_init_fn(loader, changed):
    """ringloader's C++ workers run no Python: a worker_init_fn given later
    (Lightning gives every loader one) is said once and not run; given at
    construction it is refused."""
    if "worker_init_fn" not in changed or not _arguments.decoded_in_cpp(loader.dataset) \
            or _same(loader.worker_init_fn, loader._settings["worker_init_fn"]):
        return changed
    warnings.warn("ringloader: worker_init_fn set after construction is not run: this "
                  "dataset's C++ workers run no Python (random augmentation is seeded "
                  "per sample)", UserWarning, stacklevel=4)
    return changed - {"worker_init_fn"}


def _settings_now(loader, changed):
    """The constructor's arguments that give the loader's attributes now."""
    settings = dict(loader._settings)
    for name in ("dataset", "num_workers", "collate_fn", "pin_memory", "timeout",
                 "worker_init_fn", "generator", "persistent_workers",
                 "multiprocessing_context"):
        settings[name] = getattr(loader, name)
    if _arguments.decoded_in_cpp(loader.dataset):  # see _native_worker_init_fn
        settings["worker_init_fn"] = loader._settings["worker_init_fn"]
    if "prefetch_factor" in changed:
        settings["prefetch_factor"] = loader.prefetch_factor
    if workers(loader) == 0:
        settings["prefetch_factor"] = None  # torch's single-process iterator reads none
    if is_iterable(settings):
        settings["batch_size"], settings["drop_last"] = loader.batch_size, loader.drop_last
        return settings
    # ringloader's own orders (sharded, a Mix, shards shuffled natively) are
    # made again from the constructor's arguments while no sampler changed.
    if loader._own_order and changed.isdisjoint(_ORDER):
        return settings
    # torch's _index_sampler: batch_sampler when batching, else sampler.
    settings.update(shuffle=None, distributed=False, rank=None, world_size=None,
                    drop_last=False)
    if loader.batch_sampler is not None:
        # A batch sampler with no batch_size of its own (timm's endless
        # _RepeatSampler) holds at most the loader's.
        settings.update(batch_sampler=loader.batch_sampler, batch_size=1, sampler=None,
                        batch_capacity=loader.batch_size)
    else:
        settings.update(batch_sampler=None, batch_size=None, sampler=loader.sampler)
    return settings


def _check_iterable(loader, settings):
    if is_iterable(loader._settings) != is_iterable(settings):
        raise OptionError("ringloader: the dataset set after construction is not of the "
                          "kind the loader was built for (map-style / IterableDataset); "
                          "build a new DataLoader for it")
    reason = _iterable_fallback(settings)
    if reason is not None:
        raise OptionError(f"ringloader: set after construction, {reason}: torch's own "
                          f"DataLoader serves that; build a new DataLoader with it")


def _iterable_fallback(settings):
    from ringloader._trainer import iterable_arguments as _iterable_arguments
    return _iterable_arguments.fallback_reason(settings["dataset"], settings["num_workers"],
                                               settings["device"])
