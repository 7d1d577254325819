# SPDX-License-Identifier: BSD-3-Clause
"""``samples`` / ``targets`` of file-backed native datasets: read-only
Sequence views of the shared sample table (docs/index.md), so the trainer
holds no per-sample Python objects."""
import collections.abc as _abc
import operator as _operator


class _TableView(_abc.Sequence):
    """A read-only Sequence over the shared sample table: items are made
    when asked for, so ``samples`` / ``targets`` cost no memory per sample
    in the trainer (a list of 1.28M tuples would cost ~150 MiB)."""

    def __init__(self, handle):
        self._handle = handle

    def __len__(self):
        return len(self._handle)

    def _item(self, index):
        raise NotImplementedError

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        index = _operator.index(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} samples")
        return self._item(index)

    def __eq__(self, other):
        if isinstance(other, _TableView) and other._handle is self._handle:
            return type(other) is type(self)
        if not isinstance(other, (_abc.Sequence, _TableView)) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self):
        head = ", ".join(repr(self[i]) for i in range(min(3, len(self))))
        more = ", ..." if len(self) > 3 else ""
        return f"<{type(self).__name__} of {len(self)}: [{head}{more}]>"


class SampleList(_TableView):
    """``dataset.samples``: ``(path, class_index)`` tuples, as torchvision's."""

    def _item(self, index):
        return (self._handle.path(index), int(self._labels[index]))

    @property
    def _labels(self):
        labels = self.__dict__.get("_labels_array")
        if labels is None:
            labels = self.__dict__["_labels_array"] = self._handle.labels()
        return labels

    def __iter__(self):
        labels, step = self._labels, 4096
        for begin in range(0, len(self), step):
            end = min(begin + step, len(self))
            for offset, path in enumerate(self._handle.paths(begin, end)):
                yield (path, int(labels[begin + offset]))


class TargetList(_TableView):
    """``dataset.targets``: the class index of each sample, as ints.
    ``numpy.asarray(targets)`` is a zero-copy read-only view."""

    @property
    def _labels(self):
        labels = self.__dict__.get("_labels_array")
        if labels is None:
            labels = self.__dict__["_labels_array"] = self._handle.labels()
        return labels

    def _item(self, index):
        return int(self._labels[index])

    def __iter__(self):
        return iter(self._labels.tolist())

    def __array__(self, dtype=None):
        return self._labels if dtype is None else self._labels.astype(dtype)

    @property
    def __array_interface__(self):
        return self._labels.__array_interface__

    def tolist(self):
        return self._labels.tolist()
