# SPDX-License-Identifier: BSD-3-Clause
"""ringloader: a DataLoader whose spawned workers decode straight into a ring
of shared memory, handing batches to the trainer without pickling or copies.

    import ringloader
    from ringloader import transforms as T

    train = ringloader.datasets.ImageFolder("/data/train", transform=T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))
    loader = ringloader.DataLoader(train, batch_size=64, shuffle=True,
                                   num_workers=4)
    for images, labels in loader:
        ...
"""
import torch  # noqa: F401  (loads libtorch before the extension)

from . import _build_info
from . import _moved

_moved.install()  # old module paths (pickles made before a module moved)

_build_info.check_torch()  # the torch built against, before its symbols load
cmake_prefix_path = _build_info.cmake_prefix_path  # pip-installed: find_package(ringloader)
from ._ringloader import (  # noqa: F401, E402
    DataIOError,
    DecodeError,
    Error,
    LeaseError,
    NodeError,
    OptionError,
    WorkerError,
)
from . import datasets, transforms  # noqa: F401, E402
# The AutoAugment family, transforms.v2 and timm's transforms register their
# ops in transforms.
from ._native import convert_autoaugment, convert_v2, convert_timm  # noqa: F401, E402
from .dataloader import DataLoader  # noqa: F401
from . import attached  # noqa: F401  (DataLoader(attach=...): its subclass)
from ._trainer import torch_fallback as _torch_fallback  # noqa: F401  (torch's loader where the ring does not serve)
from .node import NodeLoader  # noqa: F401
from .progress import progress  # noqa: F401

__all__ = [
    "DataLoader", "progress", "datasets", "transforms", "Error", "OptionError",
    "DataIOError", "DecodeError", "WorkerError", "LeaseError", "NodeLoader", "NodeError",
]

# Last, once this package is complete: the clean process Python workers are
# forked from starts now (a fork of this process while it is one thread
# without CUDA, else spawned and importing torch in the background), so a
# loader's first batch does not wait for it. $RINGLOADER_PRESTART=0 starts
# it at the first loader with a Python dataset instead.
from ._trainer import zygote_process as _zygote_process  # noqa: E402
from ._workers.library_warmup import warm_seeding as _warm_seeding  # noqa: E402

# numpy.random, which every worker's seeding imports (torch's workers' too),
# once here where torch imported numpy (6 ms): the zygote and every server
# and worker forked from this process inherit it, and a loader's servers
# forked when it is built do not wait for it.
_warm_seeding()
_zygote_process.prestart()
