# SPDX-License-Identifier: BSD-3-Clause
"""What a DataLoader's epochs run on: one backend per loader, chosen at
construction (dataloader.py), each with its own iterator class that owns
the epoch in progress, as torch's ``_SingleProcessDataLoaderIter`` and
``_MultiProcessingDataLoaderIter`` do:

* ``_ring.CppWorkersBackend``: a dataset the C++ workers decode
  (ringloader.datasets, or a converted torchvision one); iterator
  ``_iterator.CppWorkersIterator``;
* ``_ring.PythonWorkersBackend``: a Python dataset with ``num_workers > 0``,
  run by forked Python workers (``_python_workers.PythonWorkers``) writing
  into the same kind of ring; iterator ``_iterator.PythonWorkersIterator``;
* ``_in_process.InProcessBackend``: a Python dataset with ``num_workers=0``;
  iterator ``_in_process.InProcessIterator``.

The two ring backends drive a *native loader* (``_ringloader.NativeLoader``,
the C++ Loader: ring, worker pool, plan); the in-process one has none.

A backend keeps what outlives one epoch: the workers, the epoch the next
``iter()`` starts and a loaded state's position for it. The DataLoader
keeps only its configuration and its backend."""
import torch

from ringloader._trainer import state as _state
from ringloader._ringloader import OptionError


class Order:
    """How an epoch's order reaches the loader, fixed at construction."""

    def __init__(self, builtin, custom_batches, streamed):
        # The C++ sampler makes it (sequential, sharded, a Mix): no set_order.
        self.builtin = builtin
        # A batch sampler's own batches, padded to batch_size (_batches.py).
        self.custom_batches = custom_batches
        # A sampler with no len (an endless generator), drawn chunk by
        # chunk (_stream.py).
        self.streamed = streamed


def draw_base_seed(generator):
    """Draws from the RNG exactly as torch's iterator does at iter() (its
    workers' base seed, drawn for num_workers=0 too), so the sampler's
    draw and code after the loop see the same random state as torch's.
    Returns it (seeding="torch" seeds the workers from it)."""
    return torch.empty((), dtype=torch.int64).random_(generator=generator).item()


class Backend:
    """The part common to all backends: the epoch counter, a loaded state's
    position, state_dict() / load_state_dict()."""

    in_ring = False    # epochs run through a native loader
    converted = None  # a torchvision / tensor dataset converted for the C++ workers

    def __init__(self, order):
        self.order = order
        self._epoch = 0       # the epoch the next iter() starts
        self._resume = None   # a loaded state's position, for that epoch

    @property
    def native(self):
        """The native loader (``_ringloader.NativeLoader``), or None."""
        return None

    def take_over(self, old):
        """Goes on where `old` (the backend this one replaces: attributes set
        after construction, _reconfigure.py) was: its next epoch, and a
        loaded state's position for it."""
        if isinstance(old, Backend):
            self._epoch, self._resume = old._epoch, old._resume
            if self.native is not None:
                self.native.set_epoch(self._epoch)

    def set_epoch(self, epoch):
        self._epoch = epoch
        if self._resume is not None and self._resume["epoch"] != epoch:
            self._resume = None  # another epoch: the saved position is moot
        if self.native is not None:
            self.native.set_epoch(epoch)

    def _next_epoch(self):
        """(the epoch iter() starts now, the position to resume it at or None)."""
        epoch, resume = self._epoch, self._resume
        self._resume = None
        if resume is not None and resume["epoch"] != epoch:
            resume = None
        self._epoch = epoch + 1
        return epoch, resume

    def state_dict(self, loader):
        if self.order.custom_batches or self.order.streamed:
            raise OptionError("ringloader: state_dict() does not support a custom "
                              "batch_sampler or a sampler with no len (their batches "
                              "are not saved)")
        return self._state(loader)

    def load_state_dict(self, loader, state):
        if isinstance(state, (list, tuple)):
            state = _state.merge(loader, state, self.in_ring, self.order.builtin)
        _state.check(loader, state, self.in_ring, self.order.builtin)
        if self.native is not None:
            self.native.load_state_dict(_state.native_dict(state))
        _state.restore_generators(loader, state)
        epoch = int(state["epoch"])
        complete = state["batches_consumed"] >= state["batches_in_epoch"]
        # Between epochs there is nothing to skip: the next epoch draws its
        # order from the restored generators as it would have.
        self._resume = self._resume_at(loader, state) if state["in_progress"] else None
        self._epoch = epoch + 1 if complete else epoch
        self._close_epoch()

    def stats(self):
        native = self.native
        return native.stats() if native else {}

    def stats_text(self):
        native = self.native
        return native.stats_text() if native else ""

    def worker_pids(self):
        native = self.native
        return native.worker_pids() if native else []
