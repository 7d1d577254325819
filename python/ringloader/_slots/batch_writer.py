# SPDX-License-Identifier: BSD-3-Clause
"""The worker side of ``_batch_structure``: writes a batch's samples into a
ring slot with the fixed costs paid once per batch, not once per sample.

Per batch: one tensor over the slot and one view per region; the record
headers are zeroed in one call; every int / float / bool leaf of the batch
is written in one copy at the end. Per sample: a flattener generated from
sample 0's structure (exact container types and lengths, so a sample it
accepts has the leaves ``BatchStructure.leaves`` would give), one
``copy_`` per tensor or array leaf whose dtype and shape are sample 0's,
and no Python allocation beyond the leaves tuple. Anything else (another
structure, dtype or shape, an int beyond int64, object leaves) takes
``BatchStructure``'s general path, so the slot's bytes are the same as
``BatchStructure.write`` would make.
"""
import numpy as np
import torch

from ringloader._slots.batch_structure import WHOLE, _HEADER

_INT64 = (-(1 << 63), (1 << 63) - 1)
_SCALAR_TYPES = {"int": int, "float": float, "bool": bool}
_DIRECT = object()  # this sample's leaf went through the general path
_STACK_BYTES = 16384  # tensors up to this size a sample are stacked per batch
_DEFERRED = ("stack", "int", "float", "bool")


def _kind(field):
    if not field.nbytes and field.kind != "object":
        return "general"
    if field.kind == "tensor" and field.nbytes <= _STACK_BYTES:
        return "stack"
    return field.kind


class BatchWriter:
    def __init__(self, structure, batch_size):
        self.structure, self.batch_size = structure, batch_size
        self.flatten = make_flattener(structure.structure)
        self.fields = structure.fields
        # The kind each leaf is written as: empty fixed leaves (no region)
        # take the general path; small tensors are stacked at the end of
        # the batch (one call), large ones copied as they come.
        self.kinds = [_kind(f) for f in self.fields]
        self.fillers = {i: (torch.zeros(f.shape, dtype=f.dtype) if kind == "stack" else 0)
                        for i, (f, kind) in enumerate(zip(self.fields, self.kinds))
                        if kind in _DEFERRED}
        self.np_dtypes = [torch.empty((), dtype=f.dtype).numpy().dtype
                          if f.kind == "ndarray" else None for f in self.fields]
        self.slot = None

    def begin(self, slot, count):
        """Starts a batch of `count` samples in `slot` (a writable memoryview)."""
        structure, size = self.structure, self.batch_size
        self.slot, self.count = slot, count
        whole = torch.frombuffer(slot, dtype=torch.uint8)
        self.regions = [structure.region(whole, f, size, size) if f.nbytes else None
                        for f in self.fields]
        self.arrays = [region.numpy() if kind == "ndarray" else None
                       for kind, region in zip(self.kinds, self.regions)]
        start = size * structure.record_offset
        headers = whole[start:start + count * structure.record_bytes]
        headers.view(count, structure.record_bytes)[:, :_HEADER].zero_()
        self.pending = {i: [filler] * count for i, filler in self.fillers.items()}
        self.direct = False

    def write(self, position, sample, index):
        fields, structure = self.fields, self.structure
        leaves = self.flatten(sample)
        if leaves is None:
            leaves = structure.leaves(sample)
            if leaves is None:
                structure._write_record(self.slot, self.batch_size, position,
                                        {WHOLE: sample}, index)
                return
        record = None
        for i, value in enumerate(leaves):
            field, kind = fields[i], self.kinds[i]
            if kind == "stack" or kind == "tensor":
                if type(value) is torch.Tensor and value.dtype is field.dtype \
                        and value.shape == field.shape:
                    if kind == "stack":
                        self.pending[i][position] = value
                    else:
                        self.regions[i][position].copy_(value)
                    continue
                if kind == "stack":
                    self.pending[i][position] = _DIRECT
                    self.direct = True
            elif kind in _SCALAR_TYPES:
                if type(value) is _SCALAR_TYPES[kind] and \
                        (kind != "int" or _INT64[0] <= value <= _INT64[1]):
                    self.pending[i][position] = value
                    continue
                self.pending[i][position] = _DIRECT
                self.direct = True
            elif kind == "ndarray":
                if type(value) is np.ndarray and value.dtype == self.np_dtypes[i] \
                        and value.shape == field.shape:
                    self.arrays[i][position] = value
                    continue
            elif kind == "object":
                record = record if record is not None else {}
                record[i] = value
                continue
            entry = structure._write_fixed(self.slot, self.batch_size, position, field, value)
            if entry is not None:
                record = record if record is not None else {}
                record[i] = entry
        if record:
            structure._write_record(self.slot, self.batch_size, position, record, index)

    def finish(self):
        """Writes the batch's deferred leaves (after the last write)."""
        for i, values in self.pending.items():
            region, dtype = self.regions[i], self.fields[i].dtype
            make = torch.stack if self.kinds[i] == "stack" else \
                (lambda values, dtype=dtype: torch.tensor(values, dtype=dtype))
            if not self.direct or not any(v is _DIRECT for v in values):
                if make is torch.stack:
                    torch.stack(values, out=region[:self.count])
                else:
                    region[:self.count].copy_(make(values))
                continue
            keep = [p for p, v in enumerate(values) if v is not _DIRECT]
            if keep:  # the others were written by the general path
                region[keep] = make([values[p] for p in keep])

    def release(self):
        """Drops every view of the slot (the worker hands the slot back)."""
        self.slot = self.regions = self.arrays = self.pending = None


def make_flattener(node):
    """A function sample -> tuple of leaves (field order), or None when the
    sample's containers are not exactly sample 0's (then the general
    ``BatchStructure.leaves`` decides). Generated once as straight-line code."""
    names, lines, leaves = {}, [], []

    def constant(value):
        name = f"_c{len(names)}"
        names[name] = value
        return name

    def visit(node, expression):
        kind, cls, children = node
        if kind == "leaf":
            leaves.append(expression)
            return
        variable = f"_v{len(lines)}"
        lines.append(f"{variable} = {expression}")
        lines.append(f"if type({variable}) is not {constant(cls)} "
                     f"or len({variable}) != {len(children)}: return None")
        if kind == "mapping":
            for key, child in children:
                visit(child, f"{variable}[{constant(key)}]")
        else:
            for position, child in enumerate(children):
                visit(child, f"{variable}[{position}]")

    visit(node, "sample")
    source = ("def flatten(sample):\n    try:\n"
              + "".join(f"        {line}\n" for line in lines)
              + f"        return ({', '.join(leaves)},)\n"
              + "    except (KeyError, IndexError, TypeError):\n        return None\n")
    namespace = dict(names)
    exec(compile(source, "<ringloader flattener>", "exec"), namespace)
    return namespace["flatten"]
