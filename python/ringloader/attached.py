# SPDX-License-Identifier: BSD-3-Clause
"""``ringloader.DataLoader(attach=name)``: a trainer's lane of a NodeLoader
(node.py, docs/gpu.md "Node loader").

Ctrl-C (any signal handler's exception) and then going on with the same
iterator loses nothing, as with a DataLoader (_iterator.py): during the
wait, and as the batch is taken, the lane raises it with nothing taken
(python/native/node.cc keeps the batch for the next call); while the batch
is being handed over here, this iterator keeps it for the next call too. In the one instant where
Python itself drops next()'s result, the lane's count of batches handed
out shows it, and the iterator then raises on every later next()."""
from . import _exceptions
from ._ringloader import AttachedLoader as _Lane
from ._ringloader import Error, OptionError
from .dataloader import DataLoader

_NO_POSITION = ("ringloader: an attached loader's position belongs to its node; "
                "restart the node with first_epoch to resume")


class AttachedDataLoader(DataLoader, attaches=True):
    """``ringloader.DataLoader(attach=name)``: a trainer's lane of a
    NodeLoader. Iterates like a DataLoader (``len``, ``set_epoch``,
    ``[data, target]`` batches, on the lane's GPU for a "cuda" node). The
    lane is ``trainer`` (Default: ``$LOCAL_RANK``, else 0). Dataset,
    sampler and workers belong to the node: ``batch_size``, when given,
    must match the node's. ``node_uid``: the uid the node must run as
    (Default: ``None``, this process's); a node of another uid is refused
    with NodeError. Batches may be changed in place; the changes are this
    process's own (copy-on-write pages of the node's ring).

    The position belongs to the node: ``state_dict()`` and
    ``load_state_dict()`` raise OptionError. ``worker_pids()`` is empty
    (the workers are the node's; ``NodeLoader.stats()`` counts them)."""

    def __init__(self, dataset=None, batch_size=None, *args, attach=None, trainer=None,
                 connect_timeout=60.0, node_uid=None, **kwargs):
        lane = _Lane(str(attach), -1 if trainer is None else int(trainer),
                     float(connect_timeout), node_uid=-1 if node_uid is None else int(node_uid))
        if batch_size is not None and int(batch_size) != lane.batch_size:
            node_batch_size = lane.batch_size
            # Detach now: the exception's traceback keeps this frame (and
            # self) alive, and a held lane would refuse the corrected retry.
            del lane
            raise OptionError(f"ringloader: batch_size={batch_size}, but node "
                              f"{attach!r} makes batches of {node_batch_size}")
        self._lane = lane
        self._generation = 0  # iter() calls: an iterator of an older one is stale
        self.attach, self.trainer, self.device = str(attach), lane.trainer, lane.device
        # torch's DataLoader attributes, as the node's loading makes them.
        self.dataset, self.batch_size, self.collate_fn = dataset, lane.batch_size, None
        self.drop_last = True  # every lane batch is full
        self.num_workers, self.timeout, self.pin_memory = 0, 0, False
        self.sampler = self.batch_sampler = self.generator = self.worker_init_fn = None
        self.prefetch_factor, self.persistent_workers = None, False

    @property
    def _converted(self):
        return False

    @property
    def _native(self):
        return None  # the native loader is the node's

    def __len__(self):
        return len(self._lane)

    def set_epoch(self, epoch):
        """The epoch the next iteration serves (forward only: the node
        decodes in order); without a call each iteration follows the last."""
        self._lane.set_epoch(int(epoch))

    def __iter__(self):
        self._generation += 1
        return AttachedIterator(self, self._lane, self._generation)

    def state_dict(self):
        raise OptionError(_NO_POSITION)

    def load_state_dict(self, state):
        raise OptionError(_NO_POSITION)

    def stats(self):
        return {"trainer": self.trainer, "device": self.device}

    def stats_text(self):
        return (f"trainer {self.trainer} of node {self.attach!r} on {self.device} "
                f"(the node's stats: NodeLoader.stats())")

    def worker_pids(self):
        return []  # the node's workers; this process has none


class AttachedIterator:
    """One epoch of a lane, started at the first next() (as the lane's
    own next() starts it)."""

    def __init__(self, loader, lane, generation):
        self._loader, self._lane, self._generation = loader, lane, generation
        self._started = self._done = False
        self._pending = None  # a batch taken, interrupted before it was returned
        self._received = lane.batches_handed_out()
        self._lost, self._last = None, None

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._lane)

    def __next__(self):
        raw = self._take()
        # A signal's exception here keeps the batch for the next next().
        try:
            return [raw.data, raw.target]
        except BaseException:
            self._pending = raw
            raise

    def _take(self):
        if self._done:
            raise StopIteration
        if self._generation != self._loader._generation:
            raise Error("ringloader: this iterator's epoch was superseded by a later "
                        "iter(loader) on the same attached loader (its lane serves one "
                        "stream): keep one iterator per loader at a time")
        if self._lost is not None:
            raise Error(self._lost)
        if self._pending is not None:
            raw, self._pending = self._pending, None
            return raw
        if not self._started:
            self._lane.begin_epoch()
            self._started = True
        try:
            batch = self._lane.next()
        except BaseException:
            self._check_lost()
            raise
        if batch is None:
            self._done = True
            raise StopIteration
        self._received += 1
        self._last = (batch.epoch, batch.index)
        return batch

    def _check_lost(self):
        if self._lane.batches_handed_out() == self._received:
            return  # nothing was taken
        self._lost = _exceptions.dropped_by_signal(
            self._last, "start a new epoch with iter(loader)")
