# SPDX-License-Identifier: BSD-3-Clause
"""Datasets ringloader's workers read natively, named like torchvision's.

Each keeps torchvision's attributes (``classes``, ``class_to_idx``,
``samples``, ``targets``) and ``__getitem__`` (through PIL, for inspection
and for use with any DataLoader); ``ringloader.DataLoader`` never calls
``__getitem__`` on them: workers decode and transform in C++.
"""
import bisect as _bisect
import itertools as _itertools
import json
import os

from torch.utils.data import Dataset as _TorchDataset

from . import _ringloader
from . import transforms as _transforms
from ._sample_views import SampleList, TargetList

__all__ = ["ImageFolder", "FileList", "IdxDataset", "FashionMNIST", "TarShards", "Mix"]

FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"


class NativeDataset:
    """Base: a dataset description plus a pipeline, both plain data.

    File-backed datasets hold a native handle instead of a description: the
    sample table it owns is shared with the workers (see ``FileList``)."""

    def __init__(self, description, transform, target_transform=None):
        if target_transform is not None:
            raise _ringloader.OptionError(
                "target_transform is not supported by native ringloader "
                "datasets (labels are int64 class indices)")
        self._description = description
        self.transform = transform
        self._pipeline = _transforms.from_torchvision(transform)

    def __len__(self):
        return len(self._description["labels"])

    def ringloader_dataset_json(self):
        return json.dumps(self._description)

    def ringloader_pipeline_json(self):
        return json.dumps(self._pipeline.to_pipeline())

    def _load_pil(self, index):
        raise NotImplementedError

    def _label(self, index):
        return int(self._description["labels"][index])

    def __getitem__(self, index):
        image = self._load_pil(index)
        if self.transform is not None:
            image = _torchvision_equivalent(self.transform)(image)
        return image, self._label(index)


class FileList(NativeDataset):
    """(path, label) pairs, or a text file of ``<path> <label>`` lines.

    The samples live in a native sample table (a sealed memfd that every
    worker maps read-only); ``samples`` and ``targets`` are views of it."""

    def __init__(self, samples, transform=None, target_transform=None,
                 mode="RGB"):
        if isinstance(samples, (str, os.PathLike)):
            samples = _read_list(os.fspath(samples))
        samples = [(os.fspath(p), int(label)) for p, label in samples]
        if not samples:
            raise _ringloader.DataIOError("ringloader: the file list is empty")
        handle = _ringloader.file_list_dataset([p for p, _ in samples],
                                               [label for _, label in samples], mode)
        self._init_table(handle, transform, target_transform, mode)

    def _init_table(self, handle, transform, target_transform, mode):
        super().__init__(None, transform, target_transform)
        self._handle = handle
        self.mode = mode
        self.samples = SampleList(handle)
        self.targets = TargetList(handle)

    def __len__(self):
        return len(self._handle)

    def ringloader_dataset_json(self):
        return self._handle.json()

    def _label(self, index):
        return self._handle.label(index)

    def _load_pil(self, index):
        from PIL import Image
        with open(self._handle.path(index), "rb") as f:
            return Image.open(f).convert(self.mode)

    # The handle owns the table's memfd; a pickle names it by the trainer's
    # /proc/<pid>/fd path, which a process of the same user reopens while
    # the trainer lives (Python workers, a spawned DataLoader worker).
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handle"] = self._handle.json()
        for key in ("samples", "targets", "imgs"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        handle = _ringloader.dataset_from_json(state.pop("_handle"))
        self.__dict__.update(state)
        self._handle = handle
        self.samples = SampleList(handle)
        self.targets = TargetList(handle)
        if "classes" in state:
            self.imgs = self.samples


class ImageFolder(FileList):
    """torchvision.datasets.ImageFolder: root/<class>/<image>, same order,
    same ``classes`` / ``class_to_idx`` / ``samples`` / ``targets``.

    Class folders are listed in parallel in C++ into the shared sample
    table. ``is_valid_file`` (a callable on each file's path, as in
    torchvision) runs here, once per file, at construction; ``extensions``
    (a ringloader addition: DatasetFolder's filter, the lower-cased path
    ends with one of them) replaces torchvision's IMG_EXTENSIONS. Giving
    both is a ValueError, as in torchvision."""

    def __init__(self, root, transform=None, target_transform=None,
                 loader=None, is_valid_file=None, mode="RGB", *, extensions=None):
        if loader is not None:
            raise _ringloader.OptionError(
                "ImageFolder: a custom loader runs Python per sample; use "
                "torchvision's ImageFolder as a plain Python dataset for that")
        if extensions is not None and is_valid_file is not None:
            raise ValueError("Both extensions and is_valid_file cannot be None "
                             "or not None at the same time")
        if isinstance(extensions, str):
            extensions = [extensions]
        root = os.path.expanduser(os.fspath(root))
        handle = _ringloader.scan_image_folder(root, mode, list(extensions or []),
                                               is_valid_file is not None)
        if is_valid_file is not None:
            handle = _keep_valid(handle, is_valid_file, root)
        self._init_table(handle, transform, target_transform, mode)
        self.root = root
        self.classes = list(handle.classes())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.imgs = self.samples


def _keep_valid(handle, is_valid_file, root):
    """The files ``is_valid_file`` accepts, in the scan's (torchvision's) order;
    a class left without one raises FileNotFoundError as torchvision does."""
    keep, step = [], 4096
    for begin in range(0, len(handle), step):
        paths = handle.paths(begin, min(begin + step, len(handle)))
        keep.extend(begin + i for i, path in enumerate(paths) if is_valid_file(path))
    classes = handle.classes()
    labels = handle.labels()
    found = {int(label) for label in set(labels[keep].tolist())} if keep else set()
    empty = sorted(c for i, c in enumerate(classes) if i not in found)
    if empty:
        raise FileNotFoundError(f"Found no valid file for the classes {', '.join(empty)}. "
                                f"(in {root}, with is_valid_file)")
    return handle.select(keep)


class IdxDataset(NativeDataset):
    """MNIST-style IDX image + label files (plain or .gz), 8-bit grayscale."""

    def __init__(self, images, labels, transform=None, target_transform=None):
        description = json.loads(_ringloader.idx_dataset(os.fspath(images),
                                                         os.fspath(labels)))
        super().__init__(description, transform, target_transform)
        self._count = description["count"]
        self._arrays = None

    def __len__(self):
        return self._count

    def _load_arrays(self):
        if self._arrays is None:
            self._arrays = (_read_idx(self._description["images"]),
                            _read_idx(self._description["labels"]))
        return self._arrays

    def _load_pil(self, index):
        from PIL import Image
        return Image.fromarray(self._load_arrays()[0][index], mode="L")

    @property
    def targets(self):
        return self._load_arrays()[1].tolist()

    def _label(self, index):
        return int(self._load_arrays()[1][index])


class FashionMNIST(IdxDataset):
    """Fashion-MNIST from Debian's dataset-fashion-mnist (or ``root``)."""

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]

    def __init__(self, root=FASHION_MNIST_ROOT, train=True, transform=None,
                 target_transform=None):
        prefix = "train" if train else "t10k"
        super().__init__(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"),
                         os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"),
                         transform, target_transform)


# TarShardOptions' defaults (include/ringloader/dataset.h), declared once.
_TAR_DEFAULTS = _ringloader.tar_shard_defaults()


class TarShards(NativeDataset):
    """WebDataset-style tar shards: ``000123.jpg`` + ``000123.cls`` is one
    sample (label = the integer text of ``.cls``, -1 without one).

    ``urls`` is a path, a brace pattern (``"train-{0000..0099}.tar"``,
    ``"{a,b}.tar"``), a ``"pipe:<command>"`` whose stdout is a shard, or a
    list of those. The shards are indexed once, here. With
    ``ringloader.DataLoader(..., shuffle=True)`` and no sampler, each epoch
    permutes the shard order and mixes samples through a seeded buffer of
    ``shuffle_buffer`` samples, so workers read shards front to back; any
    sampler still works (a random one reads shards at random places).
    The samples' index lives in one native table (a sealed memfd every
    worker maps read-only; ``docs/index.md``, "Tar shards"): ``targets`` is
    a read-only view of its labels (``numpy.asarray`` is zero-copy).

    Shard cache (``docs/tar_shards.md``): with ``cache_dir``, each shard
    (``pipe:`` ones; local ones too with ``cache_local=True``) is fetched
    once per node into that folder and read from there by every worker and
    every loader sharing it (one fetch per shard, others wait on its lock),
    ``prefetch_shards`` ahead of the epoch order. The folder keeps at most
    ``cache_limit_bytes`` (Default: 16 GiB; least recently used shards are
    deleted). A fetch that fails or is cut short is tried ``fetch_attempts``
    times (Default: 3), then raises ``DataIOError`` naming the shard, the
    command's exit status and its stderr. The folder must be your own and
    writable by no one else (created 0700 when missing); another user's, or
    one others may write (as ``/tmp``), raises ``DataIOError`` naming it.

    Shard index (``docs/tar_shards.md``, "Shard index"): ``index`` is the
    JSON file ``ringloader-shard`` writes next to the shards it makes (or
    with ``--index-only`` for existing ones; a path or ``"pipe:<command>"``).
    Construction then reads it instead of every shard, so ``pipe:`` shards
    are first read by the workers. ``urls`` may be ``None`` to take the
    index's shard list. A corrupt index raises ``DataIOError``, one for
    other shards ``OptionError``, a stale one ``DataIOError`` naming the
    shard and "stale index". A plain wids index (``"nsamples"`` per shard
    only, as ``widsindex`` writes it) serves ``pipe:`` shards without a
    cache: workers find each sample by streaming its shard, epochs and
    ``state_dict`` are the full index's, ``counts_only`` is True and
    ``targets`` raises ``OptionError`` (labels are read from the shards as
    they stream; ``docs/tar_shards.md``, "A plain wids index"). Without
    an index, construction reads ``index_streams`` shards at once (Default:
    8): a ``pipe:`` download is usually limited per connection. When every
    shard is ``pipe:`` and there is no ``cache_dir``, it reads them in the
    background instead (``index_in_background``, Default: True): it returns
    at once, and a DataLoader's first epoch starts after its first shard
    is indexed, with the order a full index gives (``docs/tar_shards.md``,
    "Indexing while reading"). ``len()``, ``shard_sizes``, ``targets``,
    ``len(loader)`` and ``state_dict()`` wait for the index.
    """

    ringloader_native_shuffle = True

    def __init__(self, urls, transform=None, target_transform=None,
                 shuffle_buffer=_TAR_DEFAULTS["shuffle_buffer"], mode="RGB", *, cache_dir=None,
                 cache_limit_bytes=_TAR_DEFAULTS["cache_limit_bytes"],
                 prefetch_shards=_TAR_DEFAULTS["prefetch_shards"],
                 cache_local=_TAR_DEFAULTS["cache_local"],
                 fetch_attempts=_TAR_DEFAULTS["fetch_attempts"], index=None,
                 index_streams=_TAR_DEFAULTS["index_streams"],
                 index_in_background=_TAR_DEFAULTS["index_in_background"]):
        if urls is None:
            urls = []
        elif isinstance(urls, (str, os.PathLike)):
            urls = [urls]
        urls = [os.fspath(u) for u in urls]
        cache_dir = os.path.abspath(os.fspath(cache_dir)) if cache_dir else ""
        index = os.fspath(index) if index else ""
        handle = _ringloader.tar_shards(
            urls, int(shuffle_buffer), mode, cache_dir, int(cache_limit_bytes),
            int(prefetch_shards), bool(cache_local), int(fetch_attempts), index,
            int(index_streams), bool(index_in_background))
        super().__init__({"kind": "tar"}, transform, target_transform)
        self.shuffle_buffer = int(shuffle_buffer)
        self.cache_dir = cache_dir or None
        self.index = index or None
        self.mode = mode
        self._set_handle(handle)

    # The samples live in the native tar sample table (a sealed memfd every
    # worker maps read-only, docs/tar_shards.md): the handle owns it, its
    # description names it, and ``targets`` is a view of its labels.
    def _set_handle(self, handle):
        self._tar = handle
        # Shards still being indexed (index_in_background) have a list, not
        # yet sizes: what needs sizes reads them on first use, and waits.
        self.urls = json.loads(handle.shard_named_json() if handle.indexing()
                               else handle.json())["shards"]
        # Read on first use: a counts-only index raises OptionError there.
        self.targets = TargetList(handle)

    def _described(self, key):
        description = self.__dict__.get("_index_description")
        if description is None:
            description = self.__dict__["_index_description"] = json.loads(self._tar.json())
        return description.get(key)

    @property
    def shard_sizes(self):
        return self._described("shard_sizes")

    @property
    def counts_only(self):
        return bool(self._described("unplaced"))

    @property
    def _manifest(self):
        return self._described("manifest")

    @property
    def _shard_ends(self):
        return list(_itertools.accumulate(self.shard_sizes))

    @property
    def ringloader_indexing(self):
        """Whether the shards are still being indexed in the background
        (never waits)."""
        return self._tar.indexing()

    def __len__(self):
        return len(self._tar)

    def ringloader_dataset_json(self):
        return self._tar.json()

    def ringloader_dataset_handle(self):
        return self._tar

    def _label(self, index):
        return self._tar.label(index)

    # A pickle names the table by the trainer's /proc/<pid>/fd path, as
    # FileList's does: valid while the trainer lives.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tar"] = self._tar.json()
        state.pop("targets", None)
        state.pop("_index_description", None)
        return state

    def __setstate__(self, state):
        handle = _ringloader.dataset_from_json(state.pop("_tar"))
        self.__dict__.update(state)
        self._set_handle(handle)

    def member_name(self, index):
        """``"<shard> member <name>"``: where sample ``index`` lives
        (``"<shard> sample <k>"`` for a counts-only index, which names no
        member)."""
        if self.counts_only:
            index = range(len(self))[index]  # IndexError as a list's
            shard = _bisect.bisect_right(self._shard_ends, index)
            first = self._shard_ends[shard - 1] if shard else 0
            return f"{self.urls[shard]} sample {index - first}"
        shard, _, _, _, name = self._tar.tar_sample(index)
        return f"{shard} member {name}"

    def __getitem__(self, index):
        import io

        from PIL import Image
        # Read as a worker reads it (TarMemberReader): a shard that changed
        # since it was indexed is an error naming it, not another image; a
        # counts-only index's label comes from the shard, as the worker's.
        data, label = self._tar.tar_sample_read(index)
        image = Image.open(io.BytesIO(data)).convert(self.mode)
        if self.transform is not None:
            image = _torchvision_equivalent(self.transform)(image)
        return image, label


def _read_list(path):
    base = os.path.dirname(path)
    samples = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                file, label = line.rsplit(None, 1)
                label = int(label)
            except ValueError:
                raise _ringloader.OptionError(
                    f"ringloader: {path} line {number}: expected '<path> <label>'")
            samples.append((_inside_list_folder(path, number, base, file), label))
    return samples


def _inside_list_folder(path, number, base, file):
    """A list file is data (docs/security.md): its entries name files under
    its own folder, never an absolute path or one that climbs out with
    ``..``. A caller who means other folders passes the (path, label) pairs
    themselves."""
    normal = os.path.normpath(file)
    if os.path.isabs(file) or normal == ".." or normal.startswith(".." + os.sep):
        raise _ringloader.OptionError(
            f"ringloader: {path} line {number}: {file!r} is outside the list's folder; "
            "a list file names files under its own folder (pass (path, label) pairs "
            "to FileList to read others)")
    return os.path.join(base, normal)


def _read_idx(path):
    import gzip

    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def _torchvision_equivalent(transform):
    """The torchvision transform a ringloader one stands for (for __getitem__)."""
    if not isinstance(transform, (_transforms.Compose, _transforms._Op)):
        return transform
    import torchvision.transforms as tv
    ops = transform.transforms if isinstance(transform, _transforms.Compose) else [transform]
    converted = []
    for op in ops:
        params = op.params()
        if "size" in params:
            size = params["size"]
            params["size"] = size[0] if len(size) == 1 else tuple(size)
        if "interpolation" in params:
            params["interpolation"] = tv.InterpolationMode(params["interpolation"])
        if op.name == "RandomCrop":
            params["padding"] = params["padding"] or None
            params["fill"] = params["fill"][0] if len(params["fill"]) == 1 else tuple(params["fill"])
        for key in ("scale", "ratio"):
            if key in params:
                params[key] = tuple(params[key])
        converted.append(getattr(tv, op.name)(**params))
    return tv.Compose(converted)


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
