# SPDX-License-Identifier: BSD-3-Clause
"""Batches and samples back out of a slot laid out by ``_batch_structure.BatchStructure``
(the trainer side of the Python-dataset path).

With the default collate, each fixed leaf's batch is a view of its slot
region (what ``default_collate`` would have stacked), each pickled leaf is
``default_collate`` of its values, and the containers are rebuilt as
``default_collate`` rebuilds them. When some sample did not fit sample 0's
structure, the samples are rebuilt and handed to ``default_collate`` itself,
so the result (or the error) is torch's. A custom ``collate_fn`` gets the
samples, structured as the dataset returned them.

Small fields (at most ``SMALL_BATCH_BYTES`` for the batch) are copied out of
the slot, so keeping labels or scalars never holds a ring slot.

Numpy arrays never point into the slot. A tensor handed out follows its
batch when the batch is spilled out of the ring (``held_batches.h``: the
storage's data pointer moves), but an ndarray keeps the address it was made
with: a view of the slot would read later batches' bytes, or unmapped
memory once the loader is gone. So each ndarray field of a batch is copied
out once (one numpy copy, which large arrays get on huge pages: 3-4x faster
than a copy per sample, and faster than making per-sample views was), and
the samples' arrays are views of that private copy. Keeping one sample's
array keeps that field's copy for the whole batch, as a tensor view keeps
its storage. torch's DataLoader pickles such arrays from its workers, so
the copy costs no more than torch does.
"""
import math

from torch.utils.data._utils.collate import default_collate

from ringloader._slots.batch_structure import WHOLE, Reshaped
from ringloader._ringloader import WorkerError

SMALL_BATCH_BYTES = 4096
_MISSING = object()


def copy_if_small(tensor):
    return tensor.clone() if tensor.numel() * tensor.element_size() <= SMALL_BATCH_BYTES \
        else tensor


def collate_batch(batch_structure, raw, batch_size, indices, where):
    """default_collate's batch for the samples in the slot `raw`."""
    count = len(indices)
    records = batch_structure.records(raw, batch_size, count)
    if any(records) and any(batch_structure.has_overrides(r) for r in records):
        arrays = _array_copies(batch_structure, raw, batch_size, count)
        samples = [sample_at(batch_structure, raw, batch_size, i, records[i], count, arrays)
                   for i in range(count)]
        try:
            return default_collate(samples)
        except Exception as error:
            raise _collate_error(batch_structure, records, indices, where, error) from error
    values = []
    for i, field in enumerate(batch_structure.fields):
        if field.kind == "object":
            batch = [record[i] for record in records]
            values.append(default_collate(tuple(batch) if field.zipped else batch))
        else:
            values.append(copy_if_small(batch_structure.region(raw, field, batch_size, count)))
    return _build(batch_structure.structure, values)


def samples(batch_structure, raw, batch_size, count):
    """The batch's samples, as the dataset returned them (for a collate_fn)."""
    records = batch_structure.records(raw, batch_size, count)
    arrays = _array_copies(batch_structure, raw, batch_size, count)
    return [sample_at(batch_structure, raw, batch_size, i, records[i], count, arrays)
            for i in range(count)]


def _array_copies(batch_structure, raw, batch_size, count):
    """Each ndarray field's region of the batch, copied out of the slot."""
    return {i: batch_structure.region(raw, field, batch_size, count).numpy().copy()
            for i, field in enumerate(batch_structure.fields) if field.kind == "ndarray"}


def sample_at(batch_structure, raw, batch_size, position, record, count, arrays):
    if WHOLE in record:
        return record[WHOLE]
    values = []
    for i, field in enumerate(batch_structure.fields):
        entry = record.get(i, _MISSING)
        if field.kind == "object" or not (entry is _MISSING or isinstance(entry, Reshaped)):
            values.append(entry)  # pickled: a copy already
            continue
        if field.kind == "ndarray":  # a view of the batch's copy, never of the slot
            array = arrays[i][position]
            if isinstance(entry, Reshaped):
                array = array.reshape(-1)[:math.prod(entry)].reshape(tuple(entry))
            values.append(array)
            continue
        tensor = batch_structure.region(raw, field, batch_size, position + 1)[position]
        if isinstance(entry, Reshaped):
            tensor = tensor.reshape(-1)[:math.prod(entry)].view(tuple(entry))
        values.append(_leaf_value(field, tensor, count))
    return _unbuild(batch_structure.structure, values)


def _leaf_value(field, tensor, count):
    small = field.nbytes * count <= SMALL_BATCH_BYTES
    if field.kind == "tensor":
        return tensor.clone() if small else tensor
    if field.kind == "npscalar":
        return tensor.numpy()[()]
    return tensor.item()  # bool, int, float


def _build(node, values):
    """Containers as default_collate makes them: mappings keep their type
    when it can be built from a dict, namedtuples stay namedtuples, tuples
    become lists, other sequences keep their type when they can."""
    kind, cls, children = node
    if kind == "leaf":
        return values[children]
    if kind == "mapping":
        items = {key: _build(child, values) for key, child in children}
        return _try_type(cls, items, dict)
    items = [_build(child, values) for child in children]
    if kind == "namedtuple":
        return cls(*items)
    if kind == "tuple":
        return items
    return _try_type(cls, items, list)


def _unbuild(node, values):
    """One sample, with the dataset's own container types."""
    kind, cls, children = node
    if kind == "leaf":
        return values[children]
    if kind == "mapping":
        items = {key: _unbuild(child, values) for key, child in children}
        return items if cls is dict else _try_type(cls, items, dict)
    items = [_unbuild(child, values) for child in children]
    if kind == "namedtuple":
        return cls(*items)
    if kind == "tuple":
        return tuple(items) if cls is tuple else _try_type(cls, items, tuple)
    return items if cls is list else _try_type(cls, items, list)


def _try_type(cls, items, fallback):
    try:
        return cls(items)
    except TypeError:
        return fallback(items)


def _collate_error(batch_structure, records, indices, where, error):
    """default_collate's error, naming the samples that differ from sample 0."""
    odd = []
    for position, record in enumerate(records):
        for key in record:
            if key == WHOLE:
                odd.append(f"sample {indices[position]} (structure differs from sample 0's)")
            elif key not in batch_structure.object_leaves:
                odd.append(f"sample {indices[position]}: {batch_structure.fields[key].where()} "
                           f"differs from sample 0's {batch_structure.fields[key].describe()}")
    message = (f"ringloader: {where}: default_collate of samples {list(indices)} failed: "
               f"{type(error).__name__}: {error}; {'; '.join(odd[:3])}. Batches of samples "
               "of varying size need a collate_fn (e.g. one that pads)")
    if isinstance(error, RuntimeError):
        return WorkerError(message)  # a RuntimeError, as torch's stack error
    try:
        return type(error)(message)
    except Exception:
        return error
