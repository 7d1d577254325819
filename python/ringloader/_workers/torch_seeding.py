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
