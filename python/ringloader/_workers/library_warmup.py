# SPDX-License-Identifier: BSD-3-Clause
"""What every new worker would otherwise pay at its first batch for the
libraries the trainer imported, paid once in the process workers are
forked from (the zygote, or the trainer when it forks a loader's servers),
so that each worker inherits it.

torch's own workers pay it in each worker at each iter() (with
persistent_workers=False): a fresh fork of a trainer that imported Pillow
took 36-37 ms for its first batch of 32 JPEGs, against 23-24 ms with the
plugins registered in its parent (2 cores, webdataset's "torchrgb")."""
import sys

from ringloader._workers.torch_seeding import import_seeded_modules


def warm_inherited_libraries():
    """Only what the trainer already imported is warmed: nothing new is
    imported that its workers would not import anyway."""
    import_seeded_modules()
    image = sys.modules.get("PIL.Image")
    if image is not None and callable(getattr(image, "preinit", None)):
        # Pillow imports its common format plugins (BMP, GIF, JPEG, PPM,
        # PNG) at the first open() or save(): 8-9 ms here, more in a worker
        # competing for the cores. Idempotent, and what open() does first.
        image.preinit()
