# SPDX-License-Identifier: BSD-3-Clause
"""What every new worker would otherwise pay at its first batch for the
libraries the trainer imported, paid once in the process workers are
forked from (the zygote, or the trainer when it forks a loader's servers),
so that each worker inherits it.

torch's own workers pay it in each worker at each iter() (with
persistent_workers=False): a fresh fork of a trainer that imported Pillow
took 36-37 ms for its first batch of 32 JPEGs, against 23-24 ms with the
plugins registered in its parent (2 cores, webdataset's "torchrgb").

One library the trainer has not imported is imported too, by a spare
worker that waits (import_image_decoders): Pillow where webdataset, whose
decoders import it lazily, is there."""
import sys

from ringloader._workers.torch_seeding import import_seeded_modules


def warm_inherited_libraries():
    """Only what the trainer already imported is warmed: nothing new is
    imported that its workers would not import anyway. Never raises: a
    library that fails here fails again where it is used, in the worker,
    whose error names the sample."""
    for step in (import_seeded_modules, _register_pillow_plugins):
        _never_raising(step)


def import_image_decoders():
    """Pillow, where the trainer imported webdataset but not Pillow: its
    image decoders import Pillow at a worker's first image, 20-30 ms of
    that worker's first batch on 2 cores (PIL.Image and what it imports).
    Only for a spare that is still waiting (worker_fork's _WarmUp): it is
    not paid on the way to a batch that may need no image. Never raises."""
    if "webdataset" in sys.modules and "PIL.Image" not in sys.modules:
        _never_raising(_import_pillow)


def warm_seeding():
    """numpy.random only (at ``import ringloader``: 6 ms where torch has
    imported numpy, every worker's seeding imports it); never raises."""
    _never_raising(import_seeded_modules)


def _never_raising(step):
    try:
        step()
    except Exception:  # noqa: BLE001, S110  (see warm_inherited_libraries)
        pass


def _import_pillow():
    import PIL.Image  # noqa: F401  (importing it is the point)
    _register_pillow_plugins()


def _register_pillow_plugins():
    image = sys.modules.get("PIL.Image")
    if image is not None and callable(getattr(image, "preinit", None)):
        # Pillow imports its common format plugins (BMP, GIF, JPEG, PPM,
        # PNG) at the first open() or save(): 8-9 ms here, more in a worker
        # competing for the cores. Idempotent, and what open() does first.
        image.preinit()
