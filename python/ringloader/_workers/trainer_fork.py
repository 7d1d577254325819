# SPDX-License-Identifier: BSD-3-Clause
"""The child side of a loader server forked straight from the trainer
(_trainer/warm_zygote.py, EarlyServer): it sheds what is the trainer's, as
a zygote forked from the trainer does (_workers/zygote.py), then serves as
any loader server."""
import os
import traceback

from ringloader._workers import zygote as _zygote
from ringloader._workers.fork_hygiene import (drop_inherited_descriptors,
                                              forget_partial_imports, leave_trainers_signals,
                                              set_name)


def serve(trainer_fd, records_fd):
    """Never returns."""
    try:
        set_name("rl-server")
        forget_partial_imports()
        drop_inherited_descriptors({0, 1, 2, trainer_fd, records_fd})
        leave_trainers_signals()
    except BaseException:  # noqa: BLE001  (a forked child must not return)
        traceback.print_exc()
        os._exit(1)
    _zygote.run_server(trainer_fd, records_fd, spare_first=True)
