"""Where the fields of a Python sample live in a ring slot.

A sample (tensor, number, numpy array, or tuples / lists / dicts of them) is
flattened into leaves. Each leaf gets a region of the slot holding that leaf
for every sample of the batch, contiguously (field-major), so the trainer's
batch tensors are plain views of the slot: no collate copy.
"""
import math
import numbers

import numpy as np
import torch


class Field:
    def __init__(self, path, dtype, shape, kind):
        self.path, self.dtype, self.shape, self.kind = path, dtype, tuple(shape), kind
        self.itemsize = torch.empty((), dtype=dtype).element_size()
        self.nbytes = self.itemsize * math.prod(self.shape)
        self.offset = 0  # per-sample prefix; the region starts at batch * offset

    def describe(self):
        where = "".join(f"[{k!r}]" for k in self.path) or "sample"
        return f"{where} ({self.kind}, dtype {self.dtype}, shape {list(self.shape)})"


def _leaf(value, path):
    if isinstance(value, torch.Tensor):
        return Field(path, value.dtype, value.shape, "tensor")
    if isinstance(value, np.ndarray):
        return Field(path, torch.from_numpy(np.ascontiguousarray(value)).dtype,
                     value.shape, "ndarray")
    if isinstance(value, bool):
        return Field(path, torch.bool, (), "bool")
    if isinstance(value, numbers.Integral):
        return Field(path, torch.int64, (), "int")
    if isinstance(value, numbers.Real):
        return Field(path, torch.float64, (), "float")
    raise TypeError(f"ringloader: cannot place a {type(value).__name__} at "
                    f"{''.join(f'[{k!r}]' for k in path) or 'the sample'} in shared "
                    "memory (tensors, numpy arrays, numbers, and tuples/lists/dicts "
                    "of them are supported; use a collate_fn-free sample)")


class Layout:
    """The structure of one sample and the slot region of each leaf."""

    def __init__(self, sample):
        self.fields = []
        self.structure = self._walk(sample, ())
        offset = 0
        for field in self.fields:
            # Each region starts aligned for its dtype (batch * offset is
            # then aligned too, as offsets are multiples of 8).
            offset = (offset + 7) // 8 * 8
            field.offset = offset
            offset += field.nbytes
        self.sample_bytes = max(8, (offset + 7) // 8 * 8)

    def _walk(self, value, path):
        if isinstance(value, dict):
            return ("dict", [(k, self._walk(v, path + (k,))) for k, v in value.items()])
        if isinstance(value, (tuple, list)):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return (kind, [self._walk(v, path + (i,)) for i, v in enumerate(value)])
        self.fields.append(_leaf(value, path))
        return ("leaf", len(self.fields) - 1)

    def leaves(self, sample):
        out = []
        self._collect(sample, self.structure, out)
        return out

    def _collect(self, value, node, out):
        kind, children = node
        if kind == "leaf":
            out.append(value)
        elif kind == "dict":
            for key, child in children:
                self._collect(value[key], child, out)
        else:
            for i, child in enumerate(children):
                self._collect(value[i], child, out)

    def region(self, raw, field, batch_size, count):
        """The batch tensor of `field`: a view of the raw slot bytes."""
        start = batch_size * field.offset
        view = raw[start:start + count * field.nbytes].view(field.dtype)
        return view.view((count,) + field.shape)

    def write(self, slot, batch_size, position, sample, index):
        """Writes one sample into the slot (a writable memoryview)."""
        leaves = self.leaves(sample)
        for field, value in zip(self.fields, leaves):
            start = batch_size * field.offset + position * field.nbytes
            target = torch.frombuffer(slot, dtype=torch.uint8, count=field.nbytes,
                                      offset=start).view(field.dtype).view(field.shape)
            source = value if isinstance(value, torch.Tensor) else torch.as_tensor(
                np.asarray(value))
            if tuple(source.shape) != field.shape or source.dtype != field.dtype:
                raise ValueError(
                    f"ringloader: sample {index}: {field.describe()} expected from "
                    f"sample 0, but this sample has dtype {source.dtype} and shape "
                    f"{list(source.shape)}; batches need equal shapes and dtypes")
            target.copy_(source)

    def collate(self, raw, batch_size, count):
        """The batch, structured like default_collate's output."""
        tensors = [self.region(raw, f, batch_size, count) for f in self.fields]
        return self._build(self.structure, tensors)

    def _build(self, node, tensors):
        kind, children = node
        if kind == "leaf":
            return tensors[children]
        if kind == "dict":
            return {key: self._build(child, tensors) for key, child in children}
        return [self._build(child, tensors) for child in children]

    def sample(self, raw, batch_size, position):
        """One sample back (for a custom collate_fn)."""
        tensors = [self.region(raw, f, batch_size, position + 1)[position]
                   for f in self.fields]
        return self._unbuild(self.structure, tensors)

    def _unbuild(self, node, tensors):
        kind, children = node
        if kind == "leaf":
            field, value = self.fields[children], tensors[children]
            if field.kind in ("int", "float", "bool"):
                return value.item()
            return value
        if kind == "dict":
            return {key: self._unbuild(child, tensors) for key, child in children}
        items = [self._unbuild(child, tensors) for child in children]
        return tuple(items) if kind == "tuple" else items
