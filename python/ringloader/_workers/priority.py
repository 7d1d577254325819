# SPDX-License-Identifier: BSD-3-Clause
"""A worker lets its trainer run first (LoaderOptions::worker_scheduling
and worker_nice in include/ringloader/options.h say why); the C++ workers
do the same in loader/worker/worker_main.cc."""
import os


def yield_to_trainer(config):
    """SCHED_BATCH where config["worker_scheduling"] is "batch", then
    config["worker_nice"] added to this process's nice value; once per
    process (a spare that becomes a worker asks twice). A refusal leaves it
    as it is."""
    global _lowered
    if _lowered:
        return
    _lowered = True
    try:
        if config.get("worker_scheduling", "normal") == "batch":
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        nice = int(config.get("worker_nice", 0))
        if nice > 0:
            os.nice(nice)
    except OSError:
        pass


_lowered = False
