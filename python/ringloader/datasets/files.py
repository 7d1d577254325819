# SPDX-License-Identifier: BSD-3-Clause
"""Datasets of image files: a list of (path, label) pairs or a list file
(``FileList``) and a torchvision-style class folder tree (``ImageFolder``),
both a sample table the trainer builds once and the workers map."""
import os

from .. import _ringloader
from .._native.sample_views import SampleList, TargetList
from .base import NativeDataset


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
