# SPDX-License-Identifier: BSD-3-Clause
"""A worker's nice value, raised by LoaderOptions::worker_nice
(include/ringloader/options.h weighs it); the C++ workers do the same in
loader/worker/worker_main.cc."""
import os


def yield_to_trainer(config):
    """Adds config["worker_nice"] to this process's nice value, once per
    process (a spare that becomes a worker asks twice); a refusal leaves it
    as it is."""
    global _lowered
    nice = int(config.get("worker_nice", 0))
    if nice <= 0 or _lowered:
        return
    _lowered = True
    try:
        os.nice(nice)
    except OSError:
        pass


_lowered = False
