# SPDX-License-Identifier: BSD-3-Clause
"""A Python dataset with num_workers=0: batches made in the trainer, under
torch's own semantics, with the position state_dict() saves."""
from torch.utils.data._utils.collate import default_collate

from ringloader._trainer import batches as _batches
from ringloader._trainer import state as _state
from ringloader._trainer.backend import Backend, draw_base_seed
from ringloader._trainer.distributed import ShardSampler


class InProcessBackend(Backend):
    """The backend: every iter() makes an InProcessIterator of its own (as
    torch's single-process iterators are independent); state_dict() saves
    the latest one's position while its epoch runs."""

    def __init__(self, order):
        super().__init__(order)
        self._latest = None  # the iterator of the latest iter()

    def iterate(self, loader):
        epoch, resume = self._next_epoch()
        if resume is None:
            draw_base_seed(loader.generator)
        self._latest = InProcessIterator(loader, self.order, epoch, resume)
        return self._latest

    def _state(self, loader):
        if self._latest is not None and self._latest.in_progress:
            return _state.in_process_state(loader, self._latest)
        return _state.empty_state(loader, self._epoch)

    def _resume_at(self, loader, state):
        return _state.in_process_resume(loader, state)

    def _close_epoch(self):
        self._latest = None


class InProcessIterator:
    """num_workers=0 with a Python dataset: torch's own semantics, in process.
    The epoch's order is drawn up front (as torch's samplers draw it at the
    first batch) so that state_dict() can carry it."""

    def __init__(self, loader, order, epoch, resume):
        self._loader = loader
        self.epoch = epoch
        self.in_progress = True  # until the epoch's last batch was taken
        # Elastic stages of this epoch (a resume at another world size).
        self.elastic = resume.get("elastic", []) if resume is not None else []
        if order.streamed:  # an endless sampler: drawn batch by batch
            self.batches, self.order, self.consumed = None, None, 0
            self._stream = iter(loader._index_batches)
            return
        if order.custom_batches:  # the batch sampler's own batches
            self.batches = _batches.own_batches(loader._index_batches)
            self.order = [i for batch in self.batches for i in batch]
            self.consumed = 0
            return
        if resume is not None and resume["order"] is not None:
            self.order = resume["order"]
        elif isinstance(loader._order_sampler, ShardSampler):
            self.order = loader._order_sampler.order(epoch)
        else:
            self.order = [int(i) for i in loader._order_sampler]
        size = loader._slot_batch_size
        self.batches = [self.order[i:i + size] for i in range(0, len(self.order), size)]
        if loader.drop_last and self.batches and len(self.batches[-1]) < size:
            self.batches.pop()
        self.consumed = 0 if resume is None else min(resume["batches_consumed"],
                                                     len(self.batches))

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader) if self.batches is None else len(self.batches)

    def __next__(self):
        if self.batches is None:
            indices = next(self._stream)  # StopIteration ends it, as torch's
        else:
            if self.consumed >= len(self.batches):
                self.in_progress = False
                raise StopIteration
            indices = self.batches[self.consumed]
            self.consumed += 1
        loader = self._loader
        collate = loader.collate_fn or default_collate
        if loader._unbatched:
            return collate(loader.dataset[indices[0]])  # unbatched, as torch
        return collate([loader.dataset[i] for i in indices])
