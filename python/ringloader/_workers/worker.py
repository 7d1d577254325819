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

from ringloader._slots import batch_codec as _codec


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


class _BatchFiller:
    """Makes each task's batch in its slot, in the loader's batch mode:

    * "structured" (the default collate): samples written in place at
      sample 0's layout (_batch_writer), collated by the trainer as views;
      a batch with a sample that outgrows that layout is collated here
      with default_collate and encoded after it (_batch_codec);
    * "collate" (a custom collate_fn): the batch's samples collated here,
      as torch's workers do, and encoded;
    * "unbatched" (batch_size=None): each sample through collate_fn
      (Default: default_convert), encoded.

    Indices equal to `padding_index` pad a custom batch sampler's short
    batch to the slot: no sample is made for them."""

    def __init__(self, config, dataset, endpoint):
        from ringloader._slots.batch_writer import BatchWriter
        from ringloader._slots.tensor_rows import rows_of
        structure = config["batch_structure"]
        self.dataset, self.mode = dataset, config.get("batch_mode", "structured")
        self.collate = config.get("collate_fn")
        self.padding_index = config.get("padding_index", -1)
        # A collate_fn that cannot be pickled runs in the trainer: a batch
        # that outgrows the layout then travels as its list of samples.
        self.collate_in_trainer = config.get("collate_in_trainer", False)
        self.start = _codec.encoded_start(structure.sample_bytes * config["batch_size"])
        self.writer = BatchWriter(structure, config["batch_size"])
        # seeding="torch": the worker was seeded once, as torch's (serve).
        self.seed_sample = (_Seeder(config["seed"]) if config.get("seeding") != "torch"
                            else lambda epoch, index: None)
        self.heartbeat = endpoint.heartbeat
        self.rows = rows_of(dataset, structure) if self.mode == "structured" else None
        self.current = None  # the sample being made (named by a failure)

    def fill(self, slot, task):
        if self.mode == "structured":
            self._structured(slot, task.samples, task.epoch)
            return
        indices = task.samples
        samples = self._fetch([i for i in indices if i != self.padding_index], task.epoch)
        batch = self.collate(samples if self.mode == "collate" else samples[0])
        self._encode(slot, batch, indices)

    def _fetch(self, indices, epoch, into=None):
        out = [] if into is None else into
        for sample_index in indices:
            self.current = sample_index
            self.heartbeat(sample_index)
            self.seed_sample(epoch, sample_index)
            out.append(self.dataset[sample_index])
        self.current = None
        return out

    def _structured(self, slot, indices, epoch):
        from ringloader._slots.batch_structure import RecordTooBig
        writer, padding = self.writer, self.padding_index
        _codec.mark_unencoded(slot, self.start)
        writer.begin(slot, len(indices))
        if self.rows is not None and _gathered(self.rows, writer, indices, self.heartbeat):
            return
        kept, outgrown = [], None
        for position, sample_index in enumerate(indices):
            if sample_index == padding:
                continue  # cut by the trainer
            sample = self._fetch([sample_index], epoch, kept)[-1]
            try:
                writer.write(position, sample, sample_index)
            except RecordTooBig:
                outgrown = position
                break
        if outgrown is None:
            writer.finish()
            return
        # Outside the except: default_collate's own error (unequal sizes)
        # is the one the trainer raises, as torch's, with no chained cause.
        self._fetch([i for i in indices[outgrown + 1:] if i != padding], epoch, kept)
        writer.release()
        if self.collate_in_trainer:  # the samples themselves, for its collate_fn
            self._encode(slot, kept, indices)
            return
        from torch.utils.data._utils.collate import default_collate
        self._encode(slot, default_collate(kept), indices)

    def _encode(self, slot, batch, indices):
        from ringloader._ringloader import OptionError
        try:
            _codec.encode_into(batch, slot, self.start)
        except _codec.TooBig as error:
            raise OptionError(
                f"ringloader: the batch of samples {list(indices)[:8]} needs at least "
                f"{error.needed} bytes in its ring slot, over the {error.capacity} "
                "bytes of DataLoader(max_batch_bytes=...); raise it") from None


def serve(index, server_pid, config, ring_fd):
    """Worker `index`'s life: fills batches until the trainer shuts down.
    `server_pid` is this process's parent (the endpoint exits with it);
    config["parent_pid"] is the trainer's."""
    import torch
    torch.set_num_threads(1)
    from ringloader._workers.priority import yield_to_trainer
    yield_to_trainer(config)
    from ringloader import _ringloader
    dataset = config["dataset"]
    torch_seeding = config.get("seeding") == "torch"
    # torch's _worker_loop, before its WorkerInfo, in both seedings: a
    # worker_init_fn may read it back (Lightning's takes the base seed as
    # torch.initial_seed() - worker_id, and numpy refused the negative one a
    # trainer's seed_everything(0) left in a worker forked from it). With
    # ringloader's seeding each sample is then seeded again from its own key.
    from ringloader._workers.torch_seeding import seed_worker
    seed_worker(config["seed"], index)
    from torch.utils.data._utils import worker as torch_worker
    torch_worker._worker_info = torch_worker.WorkerInfo(
        id=index, num_workers=config["num_workers"], seed=config["seed"] + index,
        dataset=dataset)
    if config.get("worker_init_fn") is not None:
        config["worker_init_fn"](index)
    endpoint = _ringloader.WorkerEndpoint(ring_fd, index, server_pid)
    if torch_seeding:
        # Batch k of an epoch is worker k % num_workers's, as torch deals them.
        endpoint.deal_round_robin(config["num_workers"])
    filler = _BatchFiller(config, dataset, endpoint)
    while True:
        task = endpoint.next_task()
        if task is None:
            return 0
        slot = endpoint.slot(task)
        started = time.perf_counter()
        try:
            filler.fill(slot, task)
        except Exception as error:
            # The trainer re-raises it with its own type and this traceback.
            from ringloader._exceptions import failure_message
            # No current sample: the batch failed as a whole (its collate).
            current = -1 if filler.current is None else filler.current
            endpoint.fail(task, current, failure_message(
                error, traceback.format_exc(), index, filler.current, task.batch_id))
            continue
        finally:
            filler.writer.release()
            del slot
        endpoint.add_times(0.0, time.perf_counter() - started)
        endpoint.publish(task)
