# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader's arguments checked (torch's checks, in torch's words, then
ringloader's own) and resolved: the dataset the loader reads (``source``:
a torchvision dataset converted for the C++ workers, or the dataset
itself), the sampler and batch sampler torch's DataLoader would show, and
how the epoch's order reaches the loader (_backend.Order).

Errors are OptionError (a ValueError), raised in the order torch raises
its own."""
import types

import torch
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

from ringloader._native import datasets as _native_datasets
from ringloader._trainer import batches as _batches
from ringloader._trainer import iterable_arguments as _iterable_arguments
from ringloader._trainer import stream as _stream
from ringloader._trainer.backend import Order
from ringloader._trainer.distributed import ShardSampler, resolve_rank
from ringloader._ringloader import OptionError


def decoded_in_cpp(dataset):
    """The C++ workers read it (ringloader.datasets, a converted one)."""
    return hasattr(dataset, "ringloader_dataset_json")


def resolve(dataset, *, batch_size, shuffle, sampler, batch_sampler, num_workers,
            drop_last, timeout, worker_init_fn, multiprocessing_context, generator,
            prefetch_factor, seed, on_error, distributed, rank, world_size, native,
            batch_capacity=None):
    """The checked arguments, as a namespace: shuffle, auto_workers, source,
    target_transform, batch_size, drop_last, sampler, batch_sampler, order,
    rank, world_size, seed, sharded, mix, native_shuffle.
    ``batch_capacity``: the longest batch of a custom batch_sampler that
    has no batch_size of its own (None: it must have one)."""
    out = types.SimpleNamespace(shuffle=shuffle, auto_workers=check_counts(
        num_workers, timeout, prefetch_factor))
    # Unbatched loading hands out samples as the dataset makes them: a
    # torchvision dataset then stays in Python workers.
    out.source, out.target_transform = _source(
        dataset, native and (batch_size is not None or batch_sampler is not None),
        worker_init_fn)
    if batch_size is None and batch_sampler is None and decoded_in_cpp(dataset):
        raise OptionError("ringloader: batch_size=None (unbatched loading) needs a "
                          "Python dataset; ringloader.datasets make whole batches")
    _check_dataset(dataset, multiprocessing_context)
    custom = batch_sampler is not None and _batches.is_custom(batch_sampler)
    out.batch_size, sampler, out.drop_last = _batching(
        batch_size, shuffle, sampler, batch_sampler, drop_last, batch_capacity)
    # batch_size=None (torch's unbatched loading): the plan's batches hold
    # one sample each; torch shows no batch_sampler then.
    out.unbatched = out.batch_size is None
    out.slot_batch_size = 1 if out.unbatched else out.batch_size
    _check_modes(on_error, out.auto_workers, out.source)
    out.sharded = distributed or rank is not None or world_size is not None
    if out.sharded and sampler is not None:
        raise OptionError("ringloader: sampler option is mutually exclusive with "
                          "distributed / rank / world_size (a DistributedSampler "
                          "shards on its own)")
    out.rank, out.world_size = resolve_rank(distributed, rank, world_size)
    if seed is None:
        seed = (generator.initial_seed() if generator is not None
                else 0 if out.sharded else torch.initial_seed())
    out.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    out.sampler, out.native_shuffle, out.mix = _sampler(dataset, out, shuffle, sampler,
                                                        generator)
    out.index_batches = (batch_sampler if custom
                         else BatchSampler(out.sampler, out.slot_batch_size, out.drop_last))
    out.batch_sampler = None if out.unbatched else out.index_batches
    # The C++ sampler makes the order itself (no set_order per epoch).
    builtin = (out.sharded or out.mix is not None
               or type(out.sampler) is SequentialSampler) and not custom
    # A sampler with no len (an endless generator) is drawn chunk by chunk.
    out.order = Order(builtin=builtin, custom_batches=custom,
                      streamed=not builtin and not _stream.has_len(out.index_batches))
    return out


# torch.utils.data.DataLoader's own prefetch_factor default: 2 up to 1.13;
# None from 2.0 on, read back as 2 when there are workers.
_TORCH_PREFETCH_DEFAULT = 2 if int(torch.__version__.split(".")[0]) < 2 else None


def check_counts(num_workers, timeout, prefetch_factor):
    """Returns whether num_workers is "auto"."""
    auto_workers = isinstance(num_workers, str) and num_workers == "auto"
    if isinstance(num_workers, str) and not auto_workers:
        raise OptionError(f"num_workers must be an int or 'auto', got {num_workers!r}")
    if not auto_workers and num_workers < 0:
        raise OptionError("num_workers option should be non-negative; "
                          "use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise OptionError("timeout option should be non-negative")
    # torch 1.x's default, 2, passed is as good as none passed: a loader
    # rebuilt from another's attributes (as Lightning does) passes it back.
    given = prefetch_factor not in (None, _TORCH_PREFETCH_DEFAULT)
    if auto_workers and given:
        raise OptionError("prefetch_factor sizes the ring per worker; with "
                          "num_workers='auto' use ring_slots or "
                          "ring_memory_budget_bytes")
    if given and num_workers == 0:
        raise OptionError("prefetch_factor option could only be specified "
                          "in multiprocessing. let num_workers > 0 to "
                          "enable multiprocessing.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise OptionError("prefetch_factor option should be non-negative")
    return auto_workers


def prefetch_factor_read_back(prefetch_factor, num_workers):
    """loader.prefetch_factor as the installed torch's DataLoader reads it
    back. The ring's depth comes from ring_slots, or from prefetch_factor
    only where it was given."""
    if prefetch_factor is not None:
        return prefetch_factor
    if _TORCH_PREFETCH_DEFAULT is not None:
        return _TORCH_PREFETCH_DEFAULT
    # "auto" is ringloader's: its ring is sized by memory, not per worker.
    return 2 if not isinstance(num_workers, str) and num_workers > 0 else None


def _source(dataset, native, worker_init_fn):
    """(the dataset the loader reads, the target_transform left to Python).
    A torchvision dataset whose samples the C++ workers can make runs
    natively by itself (``native=False`` keeps Python workers)."""
    source, target_transform = dataset, None
    if native and not decoded_in_cpp(dataset):
        converted, target_transform = _native_datasets.convert(dataset, worker_init_fn)
        source = converted if converted is not None else dataset
    if worker_init_fn is not None and decoded_in_cpp(dataset):
        raise OptionError("worker_init_fn: ringloader's native workers run "
                          "no Python, so there is nothing to initialise")
    return source, target_transform


def torch_serves(signature, args, kwargs):
    """Why torch's own DataLoader serves the dataset of DataLoader(*args,
    **kwargs) (`signature`: DataLoader.__init__'s), or None when ringloader
    does (or the arguments do not bind: __init__ then says what is wrong)."""
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    values = bound.arguments
    return _iterable_arguments.fallback_reason(values["dataset"], values["num_workers"],
                                               values["device"])


def _check_dataset(dataset, multiprocessing_context):
    if isinstance(dataset, torch.utils.data.IterableDataset):
        raise OptionError("ringloader.DataLoader: IterableDataset is not "
                          "supported (batches are planned by index)")
    if multiprocessing_context not in (None, "spawn", "forkserver", "fork"):
        if getattr(multiprocessing_context, "get_start_method", None) is None:
            raise OptionError(f"multiprocessing_context {multiprocessing_context!r}"
                              " is not understood")


def _batching(batch_size, shuffle, sampler, batch_sampler, drop_last, batch_capacity):
    """(batch_size, sampler, drop_last), as a batch_sampler sets them."""
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise OptionError("batch_sampler option is mutually exclusive "
                              "with batch_size, shuffle, sampler, and drop_last")
        if _batches.is_custom(batch_sampler):  # its own batches, as torch
            batch_size = _batches.capacity(batch_sampler, batch_capacity)
            sampler = getattr(batch_sampler, "sampler", None)
        else:
            sampler, batch_size = batch_sampler.sampler, batch_sampler.batch_size
            drop_last = batch_sampler.drop_last
    elif batch_size is None and drop_last:
        raise OptionError("batch_size=None option disables auto-batching "
                          "and is mutually exclusive with drop_last")
    if sampler is not None and shuffle:
        raise OptionError("sampler option is mutually exclusive with shuffle")
    return batch_size, sampler, drop_last


def _check_modes(on_error, auto_workers, source):
    if on_error not in ("raise", "skip"):
        raise OptionError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if auto_workers and not decoded_in_cpp(source):
        raise OptionError("ringloader: num_workers='auto' needs a dataset the native "
                          "workers load (ringloader.datasets, or a torchvision "
                          "dataset that converts); give a number for Python datasets")
    if on_error == "skip" and not decoded_in_cpp(source):
        raise OptionError("on_error='skip' needs a ringloader.datasets dataset; "
                          "a Python dataset's __getitem__ decides what to skip")


def _sampler(dataset, out, shuffle, sampler, generator):
    """(the sampler, whether the C++ workers shuffle, the datasets.Mix)."""
    # Tar shards shuffle natively (shard order + a seeded buffer), so
    # workers read each shard front to back.
    native_shuffle = bool(shuffle) and sampler is None and getattr(
        out.source, "ringloader_native_shuffle", False)
    # A weighted mix draws each epoch in the C++ sampler (datasets.Mix).
    mix = getattr(dataset, "ringloader_mix", None)
    if mix is not None and sampler is not None:
        raise OptionError("ringloader: a datasets.Mix draws its own order; "
                          "sampler must stay None")
    if out.sharded or mix is not None:
        sampler = ShardSampler(len(dataset), {
            "shuffle": bool(shuffle), "seed": out.seed, "rank": out.rank,
            "world_size": out.world_size}, mix=mix,
            batching={"batch_size": int(out.slot_batch_size),
                      "drop_last": bool(out.drop_last)})
    elif sampler is None:
        sampler = (RandomSampler(dataset, generator=generator)
                   if shuffle and not native_shuffle else SequentialSampler(dataset))
    return sampler, native_shuffle, mix
