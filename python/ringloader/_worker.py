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

import numpy as np


class _Seeder:
    """Per-sample seeds: random augmentation depends on (seed, epoch, index),
    never on which worker (or rank, or batch) runs the sample. The seeds are
    ``torch.manual_seed`` / ``random.seed`` / ``np.random.seed`` of one key,
    at a tenth of their cost: ``torch.manual_seed`` spends most of its 34 µs
    on CUDA's lazy seeding and its fork checks, so the CPU generator is
    seeded directly, and CUDA's generators only once this worker has
    initialised CUDA (checked per sample, as a sample may be the one that
    starts it: 24 ns); ``random.seed`` skips its Python wrapper."""

    def __init__(self, seed):
        import _random

        import torch
        self.seed, self.torch = seed, torch
        self.cpu = torch.default_generator
        # random.seed(int) is Random.seed: the C seeding plus gauss_next.
        self.python, self.python_seed = random._inst, _random.Random.seed

    def __call__(self, epoch, index):
        key = hash((self.seed, epoch, index)) & 0xFFFFFFFF
        if self.torch.cuda.is_initialized():
            self.torch.manual_seed(key)
        else:
            self.cpu.manual_seed(key)
        self.python_seed(self.python, key)
        self.python.gauss_next = None
        np.random.seed(key)


def _gathered(rows, writer, samples, heartbeat):
    """Whether the batch's rows were gathered into the slot; when not (a bad
    index), the batch runs sample by sample and fails as torch's would."""
    if samples:
        heartbeat(samples[0])
    try:
        rows.gather(writer.regions, samples)
    except (IndexError, RuntimeError):
        return False
    return True


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
    from ringloader._batch_writer import BatchWriter
    from ringloader._tensor_rows import rows_of
    endpoint = _ringloader.WorkerEndpoint(ring_fd, index, server_pid)
    writer = BatchWriter(batch_structure, config["batch_size"])
    seed_sample = _Seeder(config["seed"])
    heartbeat = endpoint.heartbeat
    rows = rows_of(dataset, batch_structure)  # a TensorDataset: gathered per batch
    while True:
        task = endpoint.next_task()
        if task is None:
            return 0
        slot = endpoint.slot(task)
        started = time.perf_counter()
        current = None
        try:
            samples, epoch = task.samples, task.epoch
            writer.begin(slot, len(samples))
            if rows is None or not _gathered(rows, writer, samples, heartbeat):
                for position, sample_index in enumerate(samples):
                    current = sample_index
                    heartbeat(sample_index)
                    seed_sample(epoch, sample_index)
                    writer.write(position, dataset[sample_index], sample_index)
                current = None
                writer.finish()
        except Exception as error:
            # The trainer re-raises it with its own type and this traceback.
            from ringloader._exceptions import failure_message
            endpoint.fail(task, current, failure_message(
                error, traceback.format_exc(), index, current, parent_pid))
            continue
        finally:
            writer.release()
            del slot
        endpoint.add_times(0.0, time.perf_counter() - started)
        endpoint.publish(task)
