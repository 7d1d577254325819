# SPDX-License-Identifier: BSD-3-Clause
"""IDX files (MNIST and its family): ``IdxDataset``, ``FashionMNIST``."""
import json
import os

from .. import _ringloader
from .base import NativeDataset


FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"


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


def _read_idx(path):
    import gzip

    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
