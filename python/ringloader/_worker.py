"""A spawned worker for Python datasets: runs ``dataset[i]`` and writes each
sample straight into its place in the ring slot (no pickling of batches).

Started by the trainer as ``python -c ... --ring-fd 3 --config-fd 4 --index I
--parent-pid P``; never imports CUDA state (a fresh interpreter, not a fork).
"""
import ctypes
import os
import pickle
import random
import signal
import sys
import time
import traceback


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


def _arguments(argv):
    values = dict(zip(argv[0::2], argv[1::2]))
    return (int(values["--ring-fd"]), int(values["--config-fd"]),
            int(values["--index"]), int(values["--parent-pid"]))


def _prepare_main(config):
    """Make the trainer's __main__ importable, as multiprocessing's spawn does."""
    sys.path[:0] = [p for p in config["sys_path"] if p not in sys.path]
    main_path = config.get("main_path")
    if main_path and os.path.exists(main_path):
        import runpy
        module = runpy.run_path(main_path, run_name="__mp_main__")
        import types
        main = types.ModuleType("__mp_main__")
        main.__dict__.update(module)
        sys.modules["__mp_main__"] = sys.modules["__main__"] = main


def _seed_sample(seed, epoch, index):
    """Per-sample seeds: random augmentation depends on (seed, epoch, index),
    never on which worker runs the sample."""
    import numpy as np
    import torch
    key = hash((seed, epoch, index)) & 0xFFFFFFFF
    torch.manual_seed(key)
    random.seed(key)
    np.random.seed(key)


def main(argv=None):
    _die_with_parent()
    ring_fd, config_fd, index, parent_pid = _arguments(argv or sys.argv[1:])
    if os.getppid() != parent_pid:
        return 1
    blobs = _read_config_bytes(config_fd)
    # Paths first: the payload may name classes of the trainer's __main__.
    _prepare_main(pickle.loads(blobs["header"]))
    import torch
    torch.set_num_threads(1)
    from ringloader import _ringloader
    config = pickle.loads(blobs["payload"])
    dataset, layout = config["dataset"], config["layout"]
    from torch.utils.data._utils import worker as torch_worker
    torch_worker._worker_info = torch_worker.WorkerInfo(
        id=index, num_workers=config["num_workers"], seed=config["seed"] + index,
        dataset=dataset)
    if config.get("worker_init_fn") is not None:
        config["worker_init_fn"](index)
    endpoint = _ringloader.WorkerEndpoint(ring_fd, index, parent_pid)
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
                layout.write(slot, batch_size, position, dataset[sample_index],
                             sample_index)
        except Exception as error:
            text = traceback.format_exc()
            sys.stderr.write(f"ringloader worker {index}: sample {current}:\n{text}")
            endpoint.fail(task, current, _failure_message(current, error, text))
            continue
        finally:
            del slot
        endpoint.add_times(0.0, time.perf_counter() - started)
        endpoint.publish(task)


def _failure_message(sample, error, text, limit=390):
    """What fits the slot's error field: the sample and the exception first,
    then as much of the traceback's end as room allows (the full traceback
    went to this worker's stderr)."""
    head = f"sample {sample}: {type(error).__name__}: {error}"[:limit // 2]
    room = limit - len(head) - 20
    tail = text[-room:] if room > 0 else ""
    return f"{head}\ntraceback (end):\n{tail}"


def _read_config_bytes(fd):
    # pread, not read: every worker shares one open file (and its offset).
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    os.close(fd)
    return pickle.loads(b"".join(chunks))


if __name__ == "__main__":
    sys.exit(main())
