# SPDX-License-Identifier: BSD-3-Clause
"""Datasets ringloader's workers read natively, named like torchvision's.

Each keeps torchvision's attributes (``classes``, ``class_to_idx``,
``samples``, ``targets``) and ``__getitem__`` (through PIL, for inspection
and for use with any DataLoader); ``ringloader.DataLoader`` never calls
``__getitem__`` on them: workers decode and transform in C++.

One module per family: ``files`` (FileList, ImageFolder), ``idx``
(IdxDataset, FashionMNIST), ``tar_shards`` (TarShards), ``mix`` (Mix), and
``base`` (NativeDataset). Every public class is named here, as
``ringloader.datasets.<Class>``: the path users import and pickles name (a
pickle made when this was one module loads, and one made now loads in
older releases).
"""
from .._native.sample_views import SampleList, TargetList  # noqa: F401
from .base import NativeDataset
from .files import FileList, ImageFolder
from .idx import FASHION_MNIST_ROOT, FashionMNIST, IdxDataset  # noqa: F401
from .mix import Mix
from .tar_shards import TarShards

__all__ = ["ImageFolder", "FileList", "IdxDataset", "FashionMNIST", "TarShards", "Mix"]

for _class in (NativeDataset, FileList, ImageFolder, IdxDataset, FashionMNIST, TarShards, Mix):
    _class.__module__ = __name__
del _class
