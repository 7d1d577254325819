# SPDX-License-Identifier: BSD-3-Clause
"""The trainer's side of Python workers (any map-style Dataset).

Workers are forked from a clean zygote (_trainer/zygote_process.py, and
_workers/zygote.py for its side), never from the
trainer and never by re-running its main script, so unguarded scripts,
``python -c``, stdin, notebooks and ``python -m pkg.train`` work. What
travels is the payload, pickled with cloudpickle: classes and functions of
``__main__`` by value, everything else by reference (importable in the
workers through the trainer's sys.path).
"""
import os
import pickle
import sys
import weakref

from ringloader import _exceptions, _ringloader
from ringloader._slots import batch_codec as _batch_codec
from ringloader._workers import stub_gate as _stub_gate
from ringloader._trainer import zygote_process as _zygote_process
from ringloader._workers import frames as _frames
from ringloader._ringloader import OptionError, WorkerError

# What the pool spawns per Python worker: a C++ stub that hands its
# descriptors to the loader server (loader/worker/python_stub_main.cc).
_STUB = os.path.join(_ringloader.library_folder(), "ringloader-python-stub")
# The native loader's bound on an external worker's sample (loader_impl.cc).
_MAX_SAMPLE_BYTES = 1 << 31


def stub_present():
    """Whether the stub Python workers need is there to run."""
    return os.access(_STUB, os.X_OK)


def _start_server(records_fd, zygote=None):
    """A new loader server: the trainer's end of its socket, _ServerProcess.
    From `zygote` (a loader's own, _trainer/warm_zygote.py) while it lives,
    else from the trainer's. Refused before any fork when the stub its
    workers need is missing."""
    if not stub_present():
        raise OptionError(f"ringloader: {_STUB} is missing or not executable: "
                          f"this build lacks the Python workers' stub (build the "
                          f"ringloader-python-stub target, or reinstall)")
    if zygote is not None and zygote.alive():
        try:
            with zygote.lock:
                return zygote.fork_server(records_fd)
        except (OSError, EOFError):
            zygote.owner = -1  # dead: the trainer's zygote serves
    for attempt in range(2):
        zygote = _zygote_process.zygote_for_use()
        try:
            with _zygote_process.lock:
                return zygote.fork_server(records_fd)
        except (OSError, EOFError) as error:
            if attempt:
                raise WorkerError(f"ringloader: cannot start Python workers' zygote: "
                                  f"{error}") from error
            zygote.owner = -1  # dead: start another


class PythonWorkers:
    """A loader server (the dataset loaded, sample 0 laid out) and the
    NativeLoader whose pool spawns a stub per worker.

    `batching` says how workers make batches (_worker._BatchFiller): "mode"
    ("structured", "collate" or "unbatched"), "collate_fn" (the workers'
    own; None for structured), "padded" (a custom batch sampler's short
    batches are padded with the index len(dataset)) and "max_batch_bytes"
    (the encoded part of each slot: virtual, committed as written).

    `seeding` "torch" (_seeding.py): no workers until restart() gives them
    the base seed of an iterator. `loader_zygote` (_warm_zygote.LoaderZygote,
    or None): the loader's own zygote, which forks its servers when it
    could be forked (they then import none of the trainer's modules again)."""

    # The zygote its servers come from: None for the trainer's (_Zygote).
    zygote = None
    # The loader's own zygote that gives `zygote` at each start (None: an
    # IterableDataset's stream workers, whose loader sets `zygote` itself).
    _loader_zygote = None
    # (records, (server socket, process)) forked ahead by fork_server().
    _forked = None

    def __init__(self, dataset, options, worker_init_fn, seed, max_pickled_bytes, batching,
                 seeding="ringloader", loader_zygote=None):
        self.options, self.seeding = options, seeding
        self._loader_zygote = loader_zygote
        self.max_pickled_bytes = max_pickled_bytes
        self.batching = batching
        self.extra = {"worker_init_fn": worker_init_fn, "seed": seed,
                      "num_workers": options["num_workers"],
                      "batch_size": options["batch_size"],
                      "batch_mode": batching["mode"], "collate_fn": batching["collate_fn"],
                      "collate_in_trainer": batching["collate_in_trainer"],
                      "seeding": seeding, "worker_nice": options.get("worker_nice", 0)}
        self.iterated = False
        self.native = self.batch_structure = self.records = None
        self.encoded_start = 0
        self.payload = self._pickle(dataset)  # refused here, as at construction
        if seeding != "torch":
            self._start(dataset)

    def restart(self, dataset, base_seed):
        """seeding="torch": new workers, as torch starts for an iterator,
        seeded base_seed + worker id (_workers/worker.py). Returns
        (native, batch_structure)."""
        self.iterated = True
        self.native = self.batch_structure = None  # old workers shut down first
        self.extra["seed"] = int(base_seed)
        self.payload = self._pickle(dataset)
        self._start(dataset)
        return self.native, self.batch_structure

    def refresh(self, dataset):
        """Before an epoch: workers with the dataset as it is now, as torch's
        re-created (non-persistent) workers see it. Restarts the workers
        only when the pickled dataset changed. Returns (native, batch_structure)."""
        self.iterated = True
        payload = self._pickle(dataset)
        if payload != self.payload:
            self.native = self.batch_structure = None  # old workers shut down first
            self.payload = payload
            self._start(dataset)
        return self.native, self.batch_structure

    def _pickle(self, dataset):
        import cloudpickle
        try:
            padding = len(dataset) if self.batching["padded"] else -1
            return cloudpickle.dumps(dict(self.extra, dataset=dataset, padding_index=padding))
        except Exception as error:
            raise OptionError(f"ringloader: the dataset must be picklable to reach "
                              f"the worker processes: {error}") from error

    def start_bound_s(self):
        """How long a server may take to answer: the workers' start timeout
        (worker_start_timeout_s, at least hang_timeout); 0: no bound."""
        return _ringloader.worker_start_timeout_s(self.options.get("hang_timeout_s", 0))

    def fork_server(self):
        """Forks the server of the next _start now. The zygote forks one
        at a time, so a loader with several (_iterable.py) forks them here
        in the order it wants their first batches, then starts them side
        by side."""
        records = _exceptions.WorkerRecords()
        try:
            self._forked = (records, self._fresh_server(records.worker_end()))
        except BaseException:
            records.close()
            raise

    def _start(self, dataset):
        if self._loader_zygote is not None:
            self.zygote = self._loader_zygote.get()  # None: the trainer's serves
        # The stubs' proof that the trainer's pool started them: their
        # config memfd holds it (see _stub_gate).
        token = _stub_gate.new_token()
        records, forked = self._forked or (_exceptions.WorkerRecords(), None)
        self._forked = None
        try:
            server, reply = self._probed_server(dataset, token, records.worker_end(), forked)
        except BaseException:
            records.close()
            raise
        records.close_worker_end()
        if "error" in reply:
            server.close()
            records.close()
            _raise_probe_error(reply)
        batch_structure = pickle.loads(reply["batch_structure"])
        command = [_STUB, reply["address"]]
        try:
            sample_bytes, options = self._geometry(batch_structure)
            native = _ringloader.NativeLoader.external(
                command, token.encode(), self._plan_size(dataset), sample_bytes, options,
                getattr(dataset, "ringloader_mix", None) or [])
        except BaseException:
            server.close()
            records.close()
            raise
        # The server lives as long as this native loader (an old epoch's
        # iterator may still hold it after a refresh); `server` also takes
        # an IterableDataset's renewals (_iterable.py).
        self.server = server
        try:
            weakref.finalize(native, _close_both, server, records)
        except TypeError:
            pass  # self.server holds it
        self.native, self.batch_structure, self.records = native, batch_structure, records
        self.encoded_start = _batch_codec.encoded_start(
            0 if batch_structure is None  # an IterableDataset's (_iterable.py)
            else batch_structure.sample_bytes * self.options["batch_size"])

    def _probed_server(self, dataset, token, records_fd, forked=None):
        """A server (`forked`, else one forked now) that unpickled the
        dataset and laid out sample 0, and its reply. This is part of the
        workers' start, so it has their bound (start_bound_s): a server
        silent that long is judged hung, killed, and one other tried (a fork
        can inherit a lock no thread will release); the second is a
        WorkerError."""
        header = {"sys_path": list(sys.path), "cwd": os.getcwd(),
                  "environ": dict(os.environ), "parent_pid": os.getpid(),
                  "max_pickled_bytes": self.max_pickled_bytes, "stub_token": token}
        bound_s = self.start_bound_s()
        for attempt in (1, 2):
            ahead = forked is not None
            server, process = forked or self._fresh_server(records_fd)
            forked = None
            server.settimeout(bound_s or None)
            try:
                _frames.send_frame(server, pickle.dumps(header))
                _frames.send_frame(server, self.payload)
                reply = pickle.loads(_frames.recv_frame(server))
            except TimeoutError:
                process.kill()
                server.close()
                what = (f"ringloader: the Python workers' loader server (pid {process.pid}) "
                        f"gave no reply in {bound_s:g} s (the workers' start timeout: "
                        f"$RINGLOADER_WORKER_START_TIMEOUT_S, at least hang_timeout) while "
                        f"it unpickled {type(dataset).__name__} and read its sample 0 to lay "
                        f"out batches")
                if attempt == 2:
                    raise WorkerError(f"{what}; killed, as was the one before it. A start "
                                      f"that takes longer needs a larger "
                                      f"$RINGLOADER_WORKER_START_TIMEOUT_S (hang_timeout=0: "
                                      f"wait as long as it takes)") from None
                sys.stderr.write(f"{what}; killed, starting another\n")
                continue
            except (OSError, EOFError) as error:
                process.close()
                server.close()
                if ahead and attempt == 1:
                    continue  # forked ahead and died since (killed): a fresh one
                raise WorkerError(f"ringloader: Python workers' loader server died: "
                                  f"{error}") from error
            process.close()
            server.settimeout(None)
            return server, reply

    def _fresh_server(self, records_fd):
        """A server forked now, for _probed_server."""
        return _start_server(records_fd, self.zygote)

    def _plan_size(self, dataset):
        """Indices the native loader plans over. The padding index
        (len(dataset)) must be a valid one for the plan."""
        return len(dataset) + (1 if self.batching["padded"] else 0)

    def _geometry(self, batch_structure):
        """(the native loader's sample_bytes, its options): slots of the
        fixed layout plus the encoded part, virtually. The ring is never
        pinned whole (pinning would commit the virtual part), and its
        automatic slot count is sized from the fixed layout."""
        batch_size = self.options["batch_size"]
        fixed = batch_structure.sample_bytes * batch_size
        total = _batch_codec.slot_bytes(fixed, self.batching["max_batch_bytes"])
        sample_bytes = -(-total // batch_size)
        if sample_bytes > _MAX_SAMPLE_BYTES:
            raise OptionError(
                f"ringloader: max_batch_bytes={self.batching['max_batch_bytes']} makes "
                f"{sample_bytes} bytes a sample at batch size {batch_size}, over "
                f"{_MAX_SAMPLE_BYTES}; lower it")
        options = dict(self.options, pin_memory=False)
        if options.get("ring_slots", 0) == 0:
            # The C++ loader's rule, from the bytes a slot is known to use
            # (the encoded part is virtual until written).
            options["ring_slots"] = _ringloader.automatic_ring_slots(options, fixed)
        return sample_bytes, options


def _close_both(server, records):
    server.close()
    records.close()


def _raise_probe_error(reply):
    """The worker could not load the dataset or lay out sample 0: the user's
    own exception type where it pickles (as torch re-raises a worker's),
    with the worker's traceback in the message. Unlike torch this happens
    at construction, since sample 0 sizes the ring."""
    where = {"unpickle": "unpickling the dataset in a worker",
             "sample": "sample 0 (probed in a worker to size the ring)",
             "batch_structure": "laying out sample 0"}.get(reply["stage"], reply["stage"])
    text = (f"ringloader: {where}: {reply['error']}\n"
            f"worker traceback:\n{reply.get('traceback', '')}")
    error = None
    if reply.get("exception") is not None:
        try:
            error = pickle.loads(reply["exception"])
            error.args = (text,)
        except Exception:  # noqa: BLE001  (an odd exception: WorkerError below)
            error = None
    raise error if error is not None else WorkerError(text)
