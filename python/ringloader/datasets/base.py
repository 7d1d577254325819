# SPDX-License-Identifier: BSD-3-Clause
"""The base of the native datasets: a description plus a pipeline, both
plain data, and the torchvision transform a ringloader one stands for (what
``__getitem__`` applies through PIL)."""
import json

from .. import _ringloader
from .. import transforms as _transforms


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
