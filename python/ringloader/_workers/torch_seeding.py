# SPDX-License-Identifier: BSD-3-Clause
"""A worker's random state as torch's _worker_loop sets it (DataLoader
seeding="torch", _trainer/seeding.py): random and torch from
base_seed + worker_id, numpy from torch's own _generate_state."""
import random


def seed_worker(base_seed, worker_id):
    """Seeds this worker as torch seeds worker `worker_id` of an iterator
    whose base seed is `base_seed`; returns its seed (WorkerInfo.seed)."""
    import torch
    from torch.utils.data._utils import worker as torch_worker
    seed = base_seed + worker_id
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # torch seeds numpy only where it is installed
        return seed
    np.random.seed(torch_worker._generate_state(base_seed, worker_id))
    return seed


def import_seeded_modules():
    """numpy 2 imports numpy.random at its first use, about 17 ms: in every
    new worker's seed_worker. The zygote imports it before it serves
    (where the trainer has numpy: nothing new is imported), so servers
    and workers find it; a loader's own zygote forked from a trainer that
    imported numpy later does too. Workers and spares check again (a
    no-op then)."""
    import sys
    if "numpy" in sys.modules:
        import numpy.random  # noqa: F401


def seeding_source_reads():
    """torch.manual_seed formats the stack (torch.cuda._lazy_call records
    where CUDA's seeding was queued), reading the source of every frame's
    file: 15-35 ms in a worker forked deep in the trainer's stack (2 cores,
    bench/clients_streams.py), on the way to its first batch. A spare
    worker makes these reads while it waits, one by one; linecache keeps
    the files for the worker it becomes (one changed since is read again
    there)."""
    import functools
    import linecache
    import os
    import traceback
    import torch.cuda
    import torch.cuda.random
    import torch.random
    here = os.path.dirname(os.path.abspath(__file__))
    paths = (torch.random.__file__, torch.cuda.random.__file__, torch.cuda.__file__,
             __file__, *(os.path.join(here, name) for name in (
                 "iterable_worker.py", "worker.py", "worker_fork.py")))
    # The frames a spare shares with its worker, then the worker's own.
    return [traceback.format_stack, *(functools.partial(linecache.getlines, path)
                                      for path in paths)]
