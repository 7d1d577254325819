# SPDX-License-Identifier: BSD-3-Clause
"""torchvision datasets that ringloader.DataLoader runs natively by itself.

An unchanged script hands ``ringloader.DataLoader`` a torchvision dataset.
When every sample can be made by the C++ workers (a decoder for its files or
arrays, a native op for every transform), the loader takes the native path
without being asked; otherwise the dataset runs in Python workers and the
reason is said once on stderr.

Natively made:
* ``ImageFolder`` / ``DatasetFolder`` with torchvision's default loader
  (PIL ``convert("RGB")``), files with a native decoder;
* ``MNIST`` / ``FashionMNIST`` / ``KMNIST`` (their in-memory ``data`` and
  ``targets``: a script that filtered them is honoured) and ``CIFAR10`` /
  ``CIFAR100``: the arrays are written once to an IDX memfd the workers read;
* ``Subset`` (``random_split``) and ``ConcatDataset`` of any of these and of
  ``ringloader.datasets`` file datasets, when the parts share one transform;
* ``TensorDataset`` of (features, int64 labels) or of one tensor, and
  ``Subset`` / ``ConcatDataset`` of it: rows in a sealed memfd
  (rows.py);
* timm's ``ImageDataset`` over an image folder (convert_timm.py).

``target_transform`` (a plain callable on the integer label) runs in the
trainer, on each label of the batch, then is collated as torch would.
"""
import os
import sys
import weakref

from ringloader import _ringloader
from ringloader._native import convert_timm as _timm
from ringloader._native import rows as _native_rows
from ringloader import transforms as _transforms

# Extensions whose files the native decoders read (by magic bytes); others
# (.webp, .tif) keep PIL in Python workers.
_NATIVE_EXTENSIONS = frozenset(
    (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".ppm", ".pgm", ".pbm", ".pnm"))
_said = set()


class NotNative(Exception):
    """Why a candidate dataset keeps Python workers (said once on stderr)."""


class Part:
    """Samples made natively: image files, or an array of images.

    kind "files": ``paths`` / ``labels`` lists; kind "array": ``images``
    (uint8 N×H×W or N×H×W×3) and ``labels`` (ints). ``transform`` and
    ``target_transform`` are the torchvision dataset's own.
    """

    def __init__(self, kind, mode, transform, target_transform, **fields):
        self.kind, self.mode = kind, mode
        self.transform, self.target_transform = transform, target_transform
        self.paths = fields.get("paths")
        self.images = fields.get("images")
        self.labels = fields["labels"]
        self.classes = fields.get("classes", [])

    def __len__(self):
        return len(self.labels)

    def take(self, indices):
        indices = [int(i) for i in indices]
        fields = {"labels": [self.labels[i] for i in indices]}
        if self.kind == "files":
            fields["paths"] = [self.paths[i] for i in indices]
        else:
            fields["images"] = self.images[indices]
        return Part(self.kind, self.mode, self.transform, self.target_transform,
                    classes=self.classes, **fields)


class ConvertedDataset:
    """The native form of a torchvision dataset: what NativeLoader reads."""

    def __init__(self, part, pipeline, name):
        self.part, self.pipeline, self.name = part, pipeline, name
        self._description = _describe(part, self)

    def __len__(self):
        return len(self.part)

    def ringloader_dataset_json(self):
        import json
        return json.dumps(self._description)

    def ringloader_pipeline_json(self):
        import json
        return json.dumps(self.pipeline.to_pipeline())

    def finish(self, data, target, collate, target_transform):
        return finish_batch(data, target, collate, target_transform)


def convert(dataset, worker_init_fn=None):
    """(ConvertedDataset or None, target_transform). None when the dataset
    is not a candidate (any user dataset: silent) or cannot go native (then
    the reason is written once to stderr)."""
    if not _is_candidate(dataset):
        return None, None
    name = type(dataset).__name__
    try:
        if worker_init_fn is not None and not _timm.seeds_python_only(worker_init_fn):
            raise NotNative("worker_init_fn runs Python in each worker")
        if _native_rows.is_tensor_tree(dataset):
            try:
                return _native_rows.ConvertedRows(dataset), None
            except _native_rows.NotRows as why:
                raise NotNative(str(why)) from None
        part = _part_of(dataset)
        pipeline = _pipeline_of(part)
    except NotNative as why:
        _say_once(f"ringloader: {name} runs in Python workers: {why}")
        return None, None
    return ConvertedDataset(part, pipeline, name), part.target_transform


def finish_batch(data, target, collate, target_transform):
    """The batch torch would give for the converted dataset: labels are the
    dataset's ints (through ``target_transform``), a custom ``collate_fn``
    sees ``(image, label)`` samples as torchvision makes them."""
    from torch.utils.data._utils.collate import default_collate
    if _timm.is_fast_collate(collate) and target_transform is None:
        return data, target  # fast_collate's (uint8 NCHW, int64 labels)
    if collate is None or collate is default_collate:
        if target_transform is None:
            return [data, target]
        return [data, default_collate([target_transform(label)
                                       for label in target.tolist()])]
    labels = target.tolist()
    if target_transform is not None:
        labels = [target_transform(label) for label in labels]
    return collate([(data[i], labels[i]) for i in range(len(labels))])


def _is_candidate(dataset):
    from torch.utils.data import ConcatDataset, Subset
    if isinstance(dataset, (Subset, ConcatDataset)) or _native_rows.is_tensor_tree(dataset):
        return True
    if hasattr(dataset, "ringloader_dataset_json"):
        return False  # a ringloader dataset on its own is native already
    module = type(dataset).__module__ or ""
    return module.startswith("torchvision.datasets") or _timm.is_dataset(dataset)


def _say_once(text):
    if text not in _said:
        _said.add(text)
        sys.stderr.write(text + "\n")


def _part_of(dataset):
    from torch.utils.data import ConcatDataset, Subset
    if isinstance(dataset, Subset):
        return _part_of(dataset.dataset).take(dataset.indices)
    if isinstance(dataset, ConcatDataset):
        return _concat([_part_of(d) for d in dataset.datasets])
    if hasattr(dataset, "ringloader_dataset_json"):
        return _ringloader_part(dataset)
    if _timm.is_dataset(dataset):
        return _timm_part(dataset)
    datasets = sys.modules.get("torchvision.datasets")
    if datasets is None:
        raise NotNative(f"{type(dataset).__name__} is not a dataset ringloader reads")
    if isinstance(dataset, datasets.DatasetFolder):
        return _folder_part(dataset, datasets)
    if isinstance(dataset, datasets.MNIST):
        return _mnist_part(dataset, datasets)
    if isinstance(dataset, datasets.CIFAR10):
        return _cifar_part(dataset, datasets)
    raise NotNative(f"{type(dataset).__name__} has no native reader")


def _own_getitem(dataset, base):
    if type(dataset).__getitem__ is not base.__getitem__:
        raise NotNative(f"{type(dataset).__name__} overrides __getitem__")


def _folder_part(dataset, datasets):
    from torchvision.datasets import folder
    _own_getitem(dataset, datasets.DatasetFolder)
    if dataset.loader not in (folder.default_loader, folder.pil_loader):
        raise NotNative("a custom loader runs Python per sample")
    paths = [path for path, _ in dataset.samples]
    _check_extensions(paths)
    return Part("files", "RGB", dataset.transform, dataset.target_transform,
                paths=paths, labels=[int(label) for _, label in dataset.samples],
                classes=list(getattr(dataset, "classes", [])))


def _timm_part(dataset):
    def why_not(reason):
        raise NotNative(reason)
    mode, paths, labels, classes = _timm.dataset_fields(dataset, why_not)
    _check_extensions(paths)
    return Part("files", mode, dataset.transform, dataset.target_transform,
                paths=paths, labels=labels, classes=classes)


def _check_extensions(paths):
    for path in paths:
        extension = os.path.splitext(path)[1].lower()
        if extension not in _NATIVE_EXTENSIONS:
            raise NotNative(f"{extension or 'extension-less'} files ({path}) "
                            "have no native decoder")


def _mnist_part(dataset, datasets):
    _own_getitem(dataset, datasets.MNIST)
    images = _uint8_array(dataset.data, 3, type(dataset).__name__)
    return Part("array", "L", dataset.transform, dataset.target_transform,
                images=images, labels=_byte_labels(dataset.targets))


def _cifar_part(dataset, datasets):
    _own_getitem(dataset, datasets.CIFAR10)
    images = _uint8_array(dataset.data, 4, type(dataset).__name__)
    if images.shape[3] != 3:
        raise NotNative("CIFAR data is not N×H×W×3")
    return Part("array", "RGB", dataset.transform, dataset.target_transform,
                images=images, labels=_byte_labels(dataset.targets))


def _ringloader_part(dataset):
    handle = getattr(dataset, "_handle", None)
    if handle is None:
        kind = (dataset._description or {}).get("kind")
        raise NotNative(f"{type(dataset).__name__} ({kind}) "
                        "cannot be subset or concatenated natively")
    part = Part("files", dataset.mode, None, None,
                paths=handle.paths(0, len(handle)), labels=handle.labels().tolist(),
                classes=list(handle.classes()))
    part.transform = dataset._pipeline  # already a ringloader Compose
    return part


def _uint8_array(data, dims, name):
    import numpy as np
    array = data.numpy() if hasattr(data, "numpy") else np.asarray(data)
    if array.dtype != np.uint8 or array.ndim != dims:
        raise NotNative(f"{name}.data is {array.dtype} with {array.ndim} dimensions, "
                        f"not uint8 with {dims}")
    return np.ascontiguousarray(array)


def _byte_labels(targets):
    labels = [int(t) for t in (targets.tolist() if hasattr(targets, "tolist") else targets)]
    if labels and (min(labels) < 0 or max(labels) > 255):
        raise NotNative("labels outside 0..255 do not fit an IDX label file")
    return labels


def _concat(parts):
    first = parts[0]
    first_pipeline = _pipeline_key(first)
    for part in parts[1:]:
        if (part.kind, part.mode) != (first.kind, first.mode):
            raise NotNative("ConcatDataset mixes image files and arrays")
        if part.kind == "array" and part.images.shape[1:] != first.images.shape[1:]:
            raise NotNative("ConcatDataset parts have different image sizes")
        if part.target_transform is not first.target_transform:
            raise NotNative("ConcatDataset parts have different target_transforms")
        if _pipeline_key(part) != first_pipeline:
            raise NotNative("ConcatDataset parts have different transforms")
    labels = [label for part in parts for label in part.labels]
    if first.kind == "files":
        return Part("files", first.mode, first.transform, first.target_transform,
                    paths=[p for part in parts for p in part.paths], labels=labels,
                    classes=first.classes)
    import numpy as np
    return Part("array", first.mode, first.transform, first.target_transform,
                images=np.concatenate([part.images for part in parts]), labels=labels)


def _pipeline_key(part):
    import json
    return json.dumps(_pipeline_of(part).to_pipeline(), sort_keys=True)


def _pipeline_of(part):
    """The ringloader Compose for the part's transform, or NotNative with
    the first op that has no native form."""
    transform = _delegated_compose(part.transform)
    if transform is None:
        raise NotNative("without a transform samples are PIL images, not tensors")
    if isinstance(transform, _transforms.Compose):
        pipeline = transform
    else:
        ops = getattr(transform, "transforms", None)
        if ops is None or type(transform).__name__ != "Compose":
            ops = [transform]
        try:
            ops = _transforms.fold_dtype_conversion(ops)
        except _ringloader.OptionError as why:  # an op with no native form where it is
            raise NotNative(str(why)) from None
        for op in ops:
            try:
                _transforms.from_torchvision_op(op)
            except _ringloader.OptionError:
                raise NotNative(f"{type(op).__name__} has no native op") from None
        pipeline = _transforms.from_torchvision(transform)
    _check_output(part, pipeline)
    return pipeline


def _delegating_call(self, img):
    return self.transforms(img)


def _delegated_compose(transform):
    """The Compose a preset class only forwards to, else ``transform``.

    torchvision's reference scripts (and many derived from them) wrap their
    Compose in a class such as ``ClassificationPresetTrain`` whose
    ``__call__`` is ``return self.transforms(img)``. The wrapper is seen
    through only when its ``__call__`` compiles to exactly that (same
    bytecode and names as ``_delegating_call``), so a wrapper that does
    anything more keeps running in Python workers."""
    inner = getattr(transform, "transforms", None)
    call = getattr(type(transform), "__call__", None)
    code = getattr(call, "__code__", None)
    if inner is None or code is None or type(transform).__name__ == "Compose":
        return transform
    reference = _delegating_call.__code__
    if (code.co_code == reference.co_code and code.co_names == reference.co_names
            and code.co_argcount == reference.co_argcount
            and type(inner).__name__ == "Compose"):
        return inner
    return transform


def _check_output(part, pipeline):
    import json
    height = width = 0
    if part.kind == "array":
        height, width = int(part.images.shape[1]), int(part.images.shape[2])
    try:
        shape = _ringloader.validate_pipeline(json.dumps(pipeline.to_pipeline()),
                                              part.mode, height, width)
    except _ringloader.OptionError as error:
        raise NotNative(f"the transform's output has no fixed shape ({error})") from None
    if shape[4] != "CHW":
        raise NotNative("the transform ends in a PIL image, not a tensor")


def _describe(part, owner):
    if part.kind == "files":
        return {"kind": "files", "mode": part.mode, "paths": part.paths,
                "labels": part.labels, "classes": part.classes}
    import json
    import numpy as np
    images = _IdxMemfd(part.images, "images")
    labels = _IdxMemfd(np.asarray(part.labels, dtype=np.uint8), "labels")
    owner._memfds = (images, labels)  # the files live as long as the dataset
    return json.loads(_ringloader.idx_dataset(images.path, labels.path))


class _IdxMemfd:
    """An array as an IDX file in a memfd. Workers open it by its
    /proc/<trainer>/fd path (no /dev/shm, nothing left behind: the memory
    goes with the last descriptor)."""

    def __init__(self, array, name):
        fd = os.memfd_create(f"ringloader-{name}", os.MFD_CLOEXEC)
        header = bytes([0, 0, 8, array.ndim]) + b"".join(
            int(size).to_bytes(4, "big") for size in array.shape)
        _write_all(fd, header)
        _write_all(fd, memoryview(array).cast("B"))
        self.path = f"/proc/{os.getpid()}/fd/{fd}"
        self._finalizer = weakref.finalize(self, os.close, fd)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
