# SPDX-License-Identifier: BSD-3-Clause
"""Where the fields of a Python sample live in a ring slot.

A sample, as ``default_collate`` understands it (tensors, numpy arrays,
numbers, strings, None, other objects, and dicts / namedtuples / tuples /
lists of them), is flattened into leaves following sample 0's structure.
Fixed leaves (tensors, numeric arrays, numbers) each get a region of the slot
holding that leaf for every sample of the batch, contiguously (field-major),
so batch tensors are plain views of the slot: no collate copy.

Everything else travels pickled in a bounded per-sample record after the
fixed regions: object leaves (strings, None, arbitrary objects) and whatever
does not fit sample 0's layout (a tensor of another shape, another dtype, a
sample of another structure). A batch with a sample whose record outgrows
its bound is collated by the worker and encoded after the fixed part
(``_batch_codec``), so the bound is a fast-path size, never a limit. The trainer side (``_collate.py``) turns the
regions and records back into batches or samples.
"""
import collections.abc
import math
import pickle
import struct
import types

import numpy as np
import torch

from ringloader._ringloader import OptionError

WHOLE = -1  # record key: the whole sample, whose structure differs from sample 0's
_HEADER = 8  # record length (int64, little endian) at the start of each record
_MIN_RECORD_BYTES = 1024  # per sample, when sample 0 has no object leaf
_MIN_OBJECT_RECORD_BYTES = 4096  # per sample, when it has some
_FIXED = ("tensor", "ndarray", "npscalar", "bool", "int", "float")
_NO_RECORD = types.MappingProxyType({})  # shared by every sample without one


class RecordTooBig(OptionError):
    """A sample's pickled fields outgrow the per-sample record: the worker
    then collates the batch itself into the slot's open-ended part
    (_batch_codec), so no budget is ever asked of the user."""


class Reshaped(tuple):
    """Record entry: this sample's tensor has this shape (same dtype, no more
    elements than sample 0's), its elements at the start of its region."""


class Field:
    def __init__(self, path, dtype, shape, kind):
        self.path, self.dtype, self.shape, self.kind = path, dtype, tuple(shape), kind
        self.itemsize = torch.empty((), dtype=dtype).element_size()
        self.numel = math.prod(self.shape)
        self.nbytes = self.itemsize * self.numel if kind in _FIXED else 0
        self.offset = 0  # per-sample prefix; the region starts at batch * offset

    def where(self):
        return "".join(f"[{k!r}]" for k in self.path) or "the sample"

    def describe(self):
        if self.kind == "object":
            return f"{self.where()} (pickled)"
        return f"{self.where()} ({self.kind}, dtype {self.dtype}, shape {list(self.shape)})"


def _numeric_array(value):
    return isinstance(value, np.ndarray) and value.dtype.kind in "biufc"


def _leaf(value, path):
    """The field sample 0's leaf defines; the checks follow default_collate's
    type dispatch (tensor, ndarray, numpy scalar, float, int, the rest)."""
    if isinstance(value, torch.Tensor):
        return Field(path, value.dtype, value.shape, "tensor")
    if _numeric_array(value):
        return Field(path, torch.from_numpy(np.zeros(0, value.dtype)).dtype,
                     value.shape, "ndarray")
    if isinstance(value, (np.bool_, np.number)) and value.dtype.kind in "biufc":
        return Field(path, torch.from_numpy(np.zeros(0, value.dtype)).dtype, (), "npscalar")
    if isinstance(value, float):
        return Field(path, torch.float64, (), "float")
    if isinstance(value, bool):
        return Field(path, torch.bool, (), "bool")
    if isinstance(value, int):
        return Field(path, torch.int64, (), "int")
    return Field(path, torch.uint8, (), "object")


def _is_container(value):
    if isinstance(value, (str, bytes, torch.Tensor, np.ndarray)):
        return False
    return isinstance(value, (collections.abc.Mapping, collections.abc.Sequence))


def _as_tensor(field, value):
    """`value` as a tensor of field's dtype, or None when it is not the kind
    sample 0 had (it then travels pickled)."""
    kind = field.kind
    try:
        if kind == "tensor" and isinstance(value, torch.Tensor):
            source = value
        elif kind == "ndarray" and _numeric_array(value):
            source = torch.as_tensor(value)
        elif kind == "npscalar" and isinstance(value, (np.bool_, np.number)):
            source = torch.as_tensor(np.asarray(value))
        elif kind == "float" and isinstance(value, float) and not isinstance(value, np.generic):
            source = torch.tensor(value, dtype=torch.float64)
        elif kind == "bool" and isinstance(value, bool):
            source = torch.tensor(value)
        elif kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            source = torch.tensor(value, dtype=torch.int64)
        else:
            return None
    except (RuntimeError, OverflowError, TypeError, ValueError):
        return None  # e.g. an int beyond int64
    return source if source.dtype == field.dtype else None


class BatchStructure:
    """The structure of one sample, the slot region of each fixed leaf, and
    the per-sample record for pickled ones.

    ``max_pickled_bytes``: the per-sample bound of the pickled record (a
    larger one sends its batch down the encoded path). Default: sized from
    sample 0 (four times its pickled leaves plus 1 KiB,
    at least 4 KiB; 1 KiB when it has none).
    """

    def __init__(self, sample, max_pickled_bytes=None):
        self.fields = []
        self.structure = self._walk(sample, ())
        self.object_leaves = frozenset(
            i for i, f in enumerate(self.fields) if f.kind == "object")
        if max_pickled_bytes is None:
            objects = {i: v for i, v in enumerate(self.leaves(sample))
                       if i in self.object_leaves}
            size = len(pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL))
            floor = _MIN_OBJECT_RECORD_BYTES if objects else _MIN_RECORD_BYTES
            max_pickled_bytes = max(floor, 4 * size + 1024)
        self.record_bytes = (int(max_pickled_bytes) + _HEADER + 63) // 64 * 64
        offset = 0
        for field in self.fields:
            # Each region starts aligned for its dtype (batch * offset is
            # then aligned too, as offsets are multiples of 8).
            offset = (offset + 7) // 8 * 8
            field.offset = offset
            offset += field.nbytes
        self.record_offset = (offset + 7) // 8 * 8
        self.sample_bytes = self.record_offset + self.record_bytes

    def _walk(self, value, path, zipped=False):
        # `zipped`: default_collate hands a leaf under a sequence the batch's
        # values as a tuple (zip), under a mapping or at the top as a list.
        if isinstance(value, collections.abc.Mapping):
            return ("mapping", type(value),
                    [(k, self._walk(v, path + (k,))) for k, v in value.items()])
        if _is_container(value):
            if isinstance(value, tuple) and hasattr(value, "_fields"):
                kind = "namedtuple"
            else:
                kind = "tuple" if isinstance(value, tuple) else "list"
            return (kind, type(value),
                    [self._walk(v, path + (i,), True) for i, v in enumerate(value)])
        self.fields.append(_leaf(value, path))
        self.fields[-1].zipped = zipped
        return ("leaf", None, len(self.fields) - 1)

    def leaves(self, sample):
        """The leaves of `sample` in field order, or None when its structure
        is not sample 0's (another container, a missing key, another length)."""
        out = []
        return out if self._collect(sample, self.structure, out) else None

    def _collect(self, value, node, out):
        kind, _, children = node
        if kind == "leaf":
            out.append(value)
            return True
        if kind == "mapping":
            if not isinstance(value, collections.abc.Mapping):
                return False
            return all(key in value and self._collect(value[key], child, out)
                       for key, child in children)
        if not _is_container(value) or isinstance(value, collections.abc.Mapping) \
                or len(value) != len(children):
            return False
        return all(self._collect(value[i], child, out) for i, child in enumerate(children))

    # -- worker side ---------------------------------------------------------

    def write(self, slot, batch_size, position, sample, index):
        """Writes one sample into the slot (a writable memoryview)."""
        record = {}
        leaves = self.leaves(sample)
        if leaves is None:
            record[WHOLE] = sample
        else:
            for i, (field, value) in enumerate(zip(self.fields, leaves)):
                if field.kind == "object":
                    record[i] = value
                    continue
                entry = self._write_fixed(slot, batch_size, position, field, value)
                if entry is not None:
                    record[i] = entry
        self._write_record(slot, batch_size, position, record, index)

    def _write_fixed(self, slot, batch_size, position, field, value):
        """Copies a fixed leaf in place; returns the record entry it needs
        (None, a Reshaped shape, or the value itself to pickle)."""
        source = _as_tensor(field, value)
        if source is None:
            return value
        if tuple(source.shape) != field.shape and source.numel() > field.numel:
            return value
        start = batch_size * field.offset + position * field.nbytes
        count = source.numel() * field.itemsize
        if count:
            target = torch.frombuffer(slot, dtype=torch.uint8, count=count, offset=start)
            target.view(field.dtype).view(source.shape).copy_(source)
        return None if tuple(source.shape) == field.shape else Reshaped(source.shape)

    def _write_record(self, slot, batch_size, position, record, index):
        start = batch_size * self.record_offset + position * self.record_bytes
        if not record:
            struct.pack_into("<q", slot, start, 0)
            return
        blob = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        if len(blob) + _HEADER > self.record_bytes:
            raise RecordTooBig(self._too_big(record, index, len(blob)))
        struct.pack_into("<q", slot, start, len(blob))
        slot[start + _HEADER:start + _HEADER + len(blob)] = blob

    def _too_big(self, record, index, size):
        sizes = {key: len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                 for key, value in record.items()}
        key = max(sizes, key=sizes.get)
        what = ("the whole sample (its structure differs from sample 0's)"
                if key == WHOLE else self.fields[key].describe())
        return (f"ringloader: sample {index}: {what} needs {sizes[key]} pickled bytes "
                f"({size} for all of the sample's pickled fields), over the "
                f"{self.record_bytes - _HEADER} bytes per sample sized from sample 0; "
                f"raise DataLoader(max_pickled_bytes=...)")

    # -- trainer side --------------------------------------------------------

    def region(self, raw, field, batch_size, count):
        """The batch tensor of `field`: a view of the raw slot bytes."""
        start = batch_size * field.offset
        view = raw[start:start + count * field.nbytes].view(field.dtype)
        return view.view((count,) + field.shape)

    def records(self, raw, batch_size, count):
        """Each sample's record (a dict, empty for none), copied out."""
        start = batch_size * self.record_offset
        area = raw[start:start + count * self.record_bytes].view(count, self.record_bytes)
        lengths = area[:, :_HEADER].contiguous().view(torch.int64).view(count).tolist()
        if not any(lengths):  # the common case: nothing pickled in the batch
            return [_NO_RECORD] * count
        return [pickle.loads(area[i, _HEADER:_HEADER + n].numpy().tobytes()) if n else {}
                for i, n in enumerate(lengths)]

    def has_overrides(self, record):
        return any(key not in self.object_leaves for key in record)
