# SPDX-License-Identifier: BSD-3-Clause
"""In-memory tensor datasets that the C++ workers read by themselves.

A ``TensorDataset`` of (features, labels) or of one tensor, and ``Subset``
/ ``ConcatDataset`` of those, is written once into a sealed memfd
(loader/data/tables/tensor_rows.h): features of any numeric dtype and row shape,
labels a 1-D int64 tensor. The C++ workers copy rows by index into the ring
slot; no Python worker is started and nothing is pickled. A batch is what
torch's default collate makes of ``tuple(t[i] for t in tensors)``:
``[features, labels]`` or ``[features]``.

The tensors are read once, when the loader is made (as the MNIST arrays
are): changing them in place afterwards is not seen by its batches (a
warning says so at the next epoch), and the memfd is a second copy of
them for the loader's life (``native=False`` keeps the Python workers).
Anything else (three tensors, float labels, a subclass with its own
``__getitem__``, CUDA or sparse tensors, tensors that require grad) keeps
the Python workers' per-batch gather (_tensor_rows.py), said once on stderr
when the dataset was a candidate.
"""
import torch

from ringloader import _ringloader
from ringloader._slots.tensor_rows import subset_index

_TYPES = {torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
          torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
          torch.bfloat16: "bfloat16", torch.float32: "float32",
          torch.float64: "float64", torch.bool: "bool"}
_MAX_ROW_DIMS = 8            # loader/data/tables/tensor_rows.h kMaxRowDims
_MAX_ROW_BYTES = (1 << 31) - 1  # a row is one ring sample (tensor_rows.cc)


class NotRows(Exception):
    """Why a tensor dataset keeps Python workers."""


def is_tensor_tree(dataset):
    """The dataset is a TensorDataset, or Subset / ConcatDataset whose
    leaves all are (the datasets' own classes, not subclasses that change
    ``__getitem__``)."""
    from torch.utils.data import ConcatDataset, Subset, TensorDataset
    kind = type(dataset)
    if isinstance(dataset, TensorDataset):
        return kind.__getitem__ is TensorDataset.__getitem__
    if isinstance(dataset, Subset) and kind.__getitem__ is Subset.__getitem__:
        return is_tensor_tree(dataset.dataset)
    if isinstance(dataset, ConcatDataset) and kind.__getitem__ is ConcatDataset.__getitem__:
        return bool(dataset.datasets) and all(is_tensor_tree(d) for d in dataset.datasets)
    return False


class ConvertedRows:
    """The native form of a tensor dataset: what NativeLoader reads. Holds
    the handle that owns the memfd its description names."""

    def __init__(self, dataset):
        self.name = type(dataset).__name__
        self._leaves = [(tensor, tensor._version) for tensor in _leaf_tensors(dataset)]
        self._warned = False
        tensors = _rows(dataset)
        features = tensors[0].contiguous()
        labels = tensors[1].contiguous() if len(tensors) == 2 else None
        self.fields = len(tensors)
        self._length = len(features)
        self._handle = _ringloader.tensor_rows_dataset(
            features.reshape(-1).view(torch.uint8).numpy(), len(features),
            _TYPES[features.dtype], list(features.shape[1:]),
            None if labels is None else labels.numpy())

    def __len__(self):
        return self._length

    def ringloader_dataset_json(self):
        return self._handle.json()

    def ringloader_pipeline_json(self):
        return "[]"  # rows are copied as they are

    def warn_if_changed(self):
        """Warns once when a tensor was changed in place since the rows
        were written (at the start of an epoch): its batches do not see it."""
        if self._warned or all(t._version == v for t, v in self._leaves):
            return
        import warnings
        self._warned = True
        warnings.warn(f"ringloader: the tensors of this {self.name} changed in place after "
                      "the loader was made; its batches hold their values from then "
                      "(make a new DataLoader to load the new values)")

    def finish(self, data, target, collate, target_transform):
        """The batch torch gives: its default collate of the row tuples is
        ``[features, labels]`` (``[features]`` for one tensor); a custom
        ``collate_fn`` sees those tuples."""
        from torch.utils.data._utils.collate import default_collate
        if collate is None or collate is default_collate:
            return [data, target] if self.fields == 2 else [data]
        if self.fields == 2:
            return collate([(data[i], target[i]) for i in range(data.shape[0])])
        return collate([(data[i],) for i in range(data.shape[0])])


def _rows(dataset):
    """The dataset's tensors, row i of each being the dataset's sample i
    (Subset rows gathered, ConcatDataset parts concatenated); NotRows when
    the C++ workers cannot copy them."""
    from torch.utils.data import ConcatDataset, Subset
    if isinstance(dataset, Subset):
        inner = _rows(dataset.dataset)
        index = _subset_index(dataset.indices, len(inner[0]))
        return [tensor[index] for tensor in inner]
    if isinstance(dataset, ConcatDataset):
        parts = [_rows(d) for d in dataset.datasets]
        first = parts[0]
        for part in parts[1:]:
            if [(t.dtype, t.shape[1:]) for t in part] != [(t.dtype, t.shape[1:]) for t in first]:
                raise NotRows("ConcatDataset parts differ in tensors, dtypes or row shapes")
        return [torch.cat([part[k] for part in parts]) for k in range(len(first))]
    return _checked(tuple(dataset.tensors))


def _leaf_tensors(dataset):
    from torch.utils.data import ConcatDataset, Subset
    if isinstance(dataset, Subset):
        return _leaf_tensors(dataset.dataset)
    if isinstance(dataset, ConcatDataset):
        return [t for d in dataset.datasets for t in _leaf_tensors(d)]
    return [t for t in dataset.tensors if isinstance(t, torch.Tensor)]


def _subset_index(indices, size):
    # Every level reads index i as torch's t[i] does (the workers' rule).
    index = subset_index(indices, size)
    if index is None:
        raise NotRows("a Subset index is outside its dataset (torch raises at that sample)")
    return index


def _checked(tensors):
    if len(tensors) not in (1, 2):
        raise NotRows(f"{len(tensors)} tensors (the native batch holds features and "
                      "int64 labels, or one tensor)")
    for tensor in tensors:
        if type(tensor) is not torch.Tensor or tensor.device.type != "cpu" \
                or tensor.layout != torch.strided or tensor.is_quantized:
            raise NotRows("a tensor is not a plain dense CPU tensor")
        if tensor.requires_grad:
            raise NotRows("a tensor requires grad (its batches would carry a graph)")
        if tensor.dtype not in _TYPES:
            raise NotRows(f"{tensor.dtype} has no native row type")
        if tensor.dim() < 1 or tensor.dim() - 1 > _MAX_ROW_DIMS:
            raise NotRows(f"a tensor of {tensor.dim()} dimensions")
        if len(tensor) != len(tensors[0]) or len(tensor) == 0:
            raise NotRows("the tensors are empty or differ in length")
    features = tensors[0]
    row_bytes = features[0].numel() * features.element_size()
    if not 0 < row_bytes <= _MAX_ROW_BYTES:
        raise NotRows(f"a row of {row_bytes} bytes")
    if len(tensors) == 2 and (tensors[1].dtype != torch.int64 or tensors[1].dim() != 1):
        raise NotRows(f"the labels are {tensors[1].dtype} of {tensors[1].dim()} dimensions, "
                      "not 1-D int64")
    return list(tensors)
