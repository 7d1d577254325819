# SPDX-License-Identifier: BSD-3-Clause
"""In-memory tensor datasets in the Python workers: a batch of a
``TensorDataset`` (or ``Subset`` / ``ConcatDataset`` of them) is gathered
row by row into the slot's regions with a few torch calls per batch, not a
``__getitem__``, a seed and a write per sample.

The bytes are those of the per-sample path: ``TensorDataset.__getitem__``
is ``tuple(t[i] for t in tensors)``, which draws no random number, so the
per-sample seeds change nothing it returns. Only the datasets' own classes
qualify (a subclass that overrides ``__getitem__`` is a user dataset), and
only when sample 0's structure is the tuple of those rows. When a batch's
gather fails (an index out of range, a negative one), the worker runs the
batch sample by sample, which raises what torch would, naming the sample.
"""
import torch


class Rows:
    """Row `i` of the dataset is row ``map[i]`` (or `i`) of the parts,
    concatenated: part `p` holds the rows ``[ends[p-1], ends[p])``."""

    def __init__(self, parts, ends, map=None):
        self.parts, self.ends, self.map = parts, ends, map

    def gather(self, regions, samples):
        """Writes the rows of `samples` into ``regions[k][:len(samples)]``."""
        index = torch.tensor(samples, dtype=torch.int64)
        if index.numel() and int(index.min()) < 0:
            raise IndexError("negative index: the per-sample path decides")
        if self.map is not None:
            index = self.map[index]
        count = len(samples)
        with torch.no_grad():
            if len(self.parts) == 1:
                for tensor, region in zip(self.parts[0], regions):
                    torch.index_select(tensor, 0, index, out=region[:count])
                return
            part_of = torch.searchsorted(self.ends, index, right=True)
            if index.numel() and int(part_of.max()) >= len(self.parts):
                raise IndexError("index beyond the dataset: the per-sample path decides")
            for part in torch.unique(part_of).tolist():
                positions = (part_of == part).nonzero().squeeze(1)
                local = index[positions] - (int(self.ends[part - 1]) if part else 0)
                for tensor, region in zip(self.parts[part], regions):
                    region[positions] = tensor[local]


def rows_of(dataset, structure):
    """The dataset's Rows when its batches can be gathered, else None."""
    rows = _resolve(dataset)
    if rows is None or structure.structure[0] != "tuple" \
            or structure.structure[1] is not tuple:
        return None
    fields = structure.fields
    if len(fields) != len(rows.parts[0]):
        return None
    for tensors in rows.parts:
        for tensor, field in zip(tensors, fields):
            if field.kind != "tensor" or not field.nbytes or tensor.dtype != field.dtype \
                    or tuple(tensor.shape[1:]) != field.shape:
                return None
    return rows


def _resolve(dataset):
    from torch.utils.data import ConcatDataset, Subset, TensorDataset
    kind = type(dataset)
    if isinstance(dataset, TensorDataset) and kind.__getitem__ is TensorDataset.__getitem__:
        tensors = tuple(dataset.tensors)
        if not tensors or any(type(t) is not torch.Tensor or t.device.type != "cpu"
                              or t.layout != torch.strided for t in tensors):
            return None
        return Rows([tensors], torch.tensor([len(tensors[0])]))
    if isinstance(dataset, Subset) and kind.__getitem__ is Subset.__getitem__:
        inner = _resolve(dataset.dataset)
        if inner is None:
            return None
        indices = subset_index(dataset.indices, len(dataset.dataset))
        if indices is None:
            return None  # the per-sample path raises what torch raises
        mapped = inner.map[indices] if inner.map is not None else indices
        return Rows(inner.parts, inner.ends, mapped)
    if isinstance(dataset, ConcatDataset) and kind.__getitem__ is ConcatDataset.__getitem__:
        return _concat([_resolve(d) for d in dataset.datasets])
    return None


def subset_index(indices, size):
    """A Subset's indices as rows of its dataset, each read as torch's
    ``t[i]`` reads it (-size <= i < size, negative ones from the end); None
    when one is outside (torch raises at that sample). The trainer's native
    rows (_native/rows.py) read Subsets by the same rule."""
    index = torch.as_tensor(list(indices), dtype=torch.int64)
    if index.numel() and (int(index.min()) < -size or int(index.max()) >= size):
        return None
    return torch.where(index < 0, index + size, index)


def _concat(children):
    if not children or any(child is None for child in children):
        return None
    parts, ends, maps, rows_before = [], [], [], 0
    for child in children:
        size = len(child.map) if child.map is not None else int(child.ends[-1])
        maps.append((child.map if child.map is not None
                     else torch.arange(size, dtype=torch.int64)) + rows_before)
        parts.extend(child.parts)
        ends.append(child.ends + rows_before)
        rows_before += int(child.ends[-1])
    plain = all(child.map is None for child in children)
    return Rows(parts, torch.cat(ends), None if plain else torch.cat(maps))
