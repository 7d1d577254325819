# SPDX-License-Identifier: BSD-3-Clause
"""Weighted mixes of datasets: ``Mix`` (Mosaic Streaming's ``proportion``
semantics), read natively when every part is."""
import bisect as _bisect
import json

from torch.utils.data import Dataset as _TorchDataset

from .. import _ringloader
from .base import NativeDataset
from .idx import IdxDataset
from .tar_shards import TarShards


class Mix(_TorchDataset):
    """A weighted mix of datasets, Mosaic Streaming's ``proportion``
    semantics: ``Mix([(ds_a, 0.7), (ds_b, 0.3)], epoch_size=None)``.

    Each epoch has ``epoch_size`` samples (None: the datasets' total size,
    Mosaic's default), of which dataset ``p`` gives
    ``round(epoch_size * weight_p / sum(weights))`` (largest remainder, so
    they sum up): whole shuffled passes over it plus the head of one more,
    drawn per ``(seed, epoch)`` by ringloader's sampler and interleaved.
    ``ringloader.DataLoader`` draws that order itself (``sampler`` must stay
    None; ``shuffle`` shuffles within and across parts; ``distributed``
    shards it; ``state_dict`` resumes it). Indices are the parts'
    concatenation: ``mix[i]`` is part ``p``'s sample ``i - offsets[p]``.

    Parts that are all ``ImageFolder`` / ``FileList`` or all ``TarShards``
    with one transform mix natively (C++ workers); any other mix (a Python
    dataset among them, different transforms) runs as a Python dataset in
    Python workers. ``len(mix)`` is the concatenation's size;
    ``mix.epoch_size`` the samples per epoch.
    """

    def __init__(self, parts, epoch_size=None):
        parts = [(dataset, float(weight)) for dataset, weight in parts]
        if not parts:
            raise _ringloader.OptionError("ringloader: Mix needs at least one dataset")
        self.datasets = [dataset for dataset, _ in parts]
        self.weights = [weight for _, weight in parts]
        self.sizes = [len(dataset) for dataset in self.datasets]
        self.offsets = [sum(self.sizes[:p]) for p in range(len(self.sizes))]
        self.choose = list(_ringloader.mix_choose(self.sizes, self.weights,
                                                  int(epoch_size or 0)))
        self.epoch_size = sum(self.choose)
        shards = [len(getattr(d, "shard_sizes", [])) for d in self.datasets]
        self.ringloader_mix = [[size, choose, count] for size, choose, count
                               in zip(self.sizes, self.choose, shards)]
        # The native mix's handle owns its sample table (files) while the
        # Mix lives; its JSON names the table.
        self._native_handle = _native_mix(self.datasets, self.weights, epoch_size)
        self._native_json = None if self._native_handle is None else self._native_handle.json()
        if self._native_json is not None:
            self._pipeline_json = self.datasets[0].ringloader_pipeline_json()
            if any(isinstance(d, TarShards) for d in self.datasets):
                self.ringloader_native_shuffle = True

    def __getattr__(self, name):
        # A native mix is read by C++ workers: only then does it describe
        # itself as a native dataset (see DataLoader's _is_native).
        if name in ("ringloader_dataset_json", "ringloader_pipeline_json") \
                and self.__dict__.get("_native_json") is not None:
            key = "_native_json" if name == "ringloader_dataset_json" else "_pipeline_json"
            return lambda: self.__dict__[key]
        raise AttributeError(name)

    def __len__(self):
        return sum(self.sizes)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_native_handle"] = None  # reopened from _native_json
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._native_json is not None:
            self._native_handle = _ringloader.dataset_from_json(self._native_json)
            self._native_json = self._native_handle.json()

    def part_of(self, index):
        """(part, index within it) of mix index ``index``."""
        part = _bisect.bisect_right(self.offsets, int(index)) - 1
        return part, int(index) - self.offsets[part]

    def __getitem__(self, index):
        part, inner = self.part_of(index)
        return self.datasets[part][inner]


def _native_mix(datasets, weights, epoch_size):
    """The C++ description of a mix the native workers can read, else None."""
    if not all(isinstance(d, NativeDataset) for d in datasets):
        return None
    if len({d.ringloader_pipeline_json() for d in datasets}) != 1:
        return None
    tar = [isinstance(d, TarShards) for d in datasets]
    if any(isinstance(d, IdxDataset) for d in datasets) or (any(tar) and not all(tar)):
        return None
    if len({json.loads(d.ringloader_dataset_json())["mode"] for d in datasets}) != 1:
        return None
    return _ringloader.mix_dataset(
        [(d.ringloader_dataset_json(), w) for d, w in zip(datasets, weights)],
        int(epoch_size or 0))
