# SPDX-License-Identifier: BSD-3-Clause
"""A Python worker: runs ``dataset[i]`` and writes each sample straight
into its place in the ring slot (no pickling of batches).

Forked by its loader server (see _zygote.py) with the dataset, its
BatchStructure and the loader's settings already in memory, and the ring's
fd. It descends from the zygote (a fork of the trainer taken at import while
it was one thread without CUDA, or a fresh interpreter), never from the
trainer as it runs, and never re-runs the trainer's main script.
"""
import random
import time
import traceback


def _seed_sample(seed, epoch, index):
    """Per-sample seeds: random augmentation depends on (seed, epoch, index),
    never on which worker runs the sample."""
    import numpy as np
    import torch
    key = hash((seed, epoch, index)) & 0xFFFFFFFF
    torch.manual_seed(key)
    random.seed(key)
    np.random.seed(key)


def serve(index, server_pid, config, ring_fd):
    """Worker `index`'s life: fills batches until the trainer shuts down.
    `server_pid` is this process's parent (the endpoint exits with it);
    config["parent_pid"] is the trainer's."""
    import torch
    torch.set_num_threads(1)
    from ringloader import _ringloader
    dataset, batch_structure = config["dataset"], config["batch_structure"]
    parent_pid = config["parent_pid"]
    from torch.utils.data._utils import worker as torch_worker
    torch_worker._worker_info = torch_worker.WorkerInfo(
        id=index, num_workers=config["num_workers"], seed=config["seed"] + index,
        dataset=dataset)
    if config.get("worker_init_fn") is not None:
        config["worker_init_fn"](index)
    endpoint = _ringloader.WorkerEndpoint(ring_fd, index, server_pid)
    batch_size = config["batch_size"]
    while True:
        task = endpoint.next_task()
        if task is None:
            return 0
        slot = endpoint.slot(task)
        started = time.perf_counter()
        current = None
        try:
            for position, sample_index in enumerate(task.samples):
                current = sample_index
                endpoint.heartbeat(sample_index)
                _seed_sample(config["seed"], task.epoch, sample_index)
                batch_structure.write(slot, batch_size, position, dataset[sample_index],
                             sample_index)
        except Exception as error:
            # The trainer re-raises it with its own type and this traceback.
            from ringloader._exceptions import failure_message
            endpoint.fail(task, current, failure_message(
                error, traceback.format_exc(), index, current, parent_pid))
            continue
        finally:
            del slot
        endpoint.add_times(0.0, time.perf_counter() - started)
        endpoint.publish(task)
