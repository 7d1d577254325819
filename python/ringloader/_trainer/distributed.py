# SPDX-License-Identifier: BSD-3-Clause
"""Which shard of the data this process loads under torchrun."""
import os

import torch
from torch.utils.data import Sampler

from ringloader import _ringloader
from ringloader._ringloader import OptionError


def resolve_rank(distributed, rank, world_size):
    """(rank, world_size) for this process: explicit values, else the
    initialised torch.distributed group, else $RANK / $WORLD_SIZE, else
    (0, 1). Without ``distributed`` or explicit values: (0, 1), like torch's
    DataLoader, which never shards on its own."""
    if not distributed and rank is None and world_size is None:
        return 0, 1
    group = torch.distributed.is_available() and torch.distributed.is_initialized()
    if world_size is None:
        world_size = (torch.distributed.get_world_size() if group
                      else _env_int("WORLD_SIZE", 1))
    if rank is None:
        rank = torch.distributed.get_rank() if group else _env_int("RANK", 0)
    rank, world_size = int(rank), int(world_size)
    if world_size <= 0 or not 0 <= rank < world_size:
        raise OptionError(f"ringloader: rank {rank} is not in [0, world_size "
                          f"{world_size})")
    return rank, world_size


def _env_int(name, default):
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise OptionError(f"ringloader: environment variable {name}={text!r} is "
                          f"not an integer") from None


class ShardSampler(Sampler):
    """This rank's share of ringloader's built-in epoch order: every
    world_size-th index of one permutation per (seed, epoch) (Philox, not
    torch's generator), padded by wrapping like DistributedSampler so every
    rank gets the same count. Without shuffle, the order equals
    ``DistributedSampler(shuffle=False)``'s."""

    def __init__(self, dataset_size, options, mix=None, batching=None):
        self.dataset_size = int(dataset_size)
        # A datasets.Mix: [size, choose, shards] per part; its epoch has
        # sum(choose) samples.
        self.mix = [list(part) for part in mix] if mix else []
        length = sum(part[1] for part in self.mix) if self.mix else self.dataset_size
        # Whole shard: the loader's BatchSampler applies drop_last.
        self._options = {key: options[key] for key in
                         ("shuffle", "seed", "rank", "world_size")}
        # The loader's batch_size / drop_last: elastic stages count batches.
        self._batching = dict(batching or {})
        self.epoch = 0
        self.rank = self._options["rank"]
        self.num_replicas = self._options["world_size"]
        self.num_samples = -(-length // self.num_replicas)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def order(self, epoch, history=()):
        """This rank's order of ``epoch``; ``history``: the epoch's elastic
        stages so far ({"world_size", "batches"} each, see docs/distributed.md)."""
        options = dict(self._options, **self._batching) if history else self._options
        return _ringloader.epoch_order(self.dataset_size, options, int(epoch),
                                       self.mix, list(history))

    def __iter__(self):
        return iter(self.order(self.epoch))

    def __len__(self):
        return self.num_samples
