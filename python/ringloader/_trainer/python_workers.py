# SPDX-License-Identifier: BSD-3-Clause
"""The trainer's side of Python workers (any map-style Dataset).

Workers are forked from a clean zygote (see _zygote.py), never from the
trainer and never by re-running its main script, so unguarded scripts,
``python -c``, stdin, notebooks and ``python -m pkg.train`` work. What
travels is the payload, pickled with cloudpickle: classes and functions of
``__main__`` by value, everything else by reference (importable in the
workers through the trainer's sys.path).
"""
import atexit
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import weakref

from ringloader import _exceptions, _ringloader
from ringloader._trainer import fork_threads as _fork_threads
from ringloader._slots import batch_codec as _batch_codec
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import fork_hygiene as _fork_hygiene
from ringloader._workers import zygote as _zygote
from ringloader._ringloader import OptionError, WorkerError

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ringloader/
_PACKAGE_PARENT = os.path.dirname(_PACKAGE)
# What the pool spawns per Python worker: a C++ stub that hands its
# descriptors to the loader server (loader/worker/python_stub_main.cc).
_STUB = os.path.join(_ringloader.library_folder(), "ringloader-python-stub")
# Set in the zygote's environment: its `import ringloader` starts no zygote.
_ZYGOTE_ENV = "RINGLOADER_IN_ZYGOTE"
# How long a loader waits for the zygote to be ready (it imports torch:
# seconds, more from a slow file system) and then for it to fork a loader
# server. Default: 120 s; $RINGLOADER_ZYGOTE_TIMEOUT_S sets it.
_TIMEOUT_ENV = "RINGLOADER_ZYGOTE_TIMEOUT_S"
_DEFAULT_TIMEOUT_S = 120.0
# A trainer holding more private memory than this at import gets a spawned
# zygote, not a forked one: a fork would keep a copy of every page of it
# the trainer later writes or frees, for the trainer's whole life.
_FORK_MAX_PRIVATE_BYTES = 1 << 30
# The native loader's bound on an external worker's sample (loader_impl.cc).
_MAX_SAMPLE_BYTES = 1 << 31


class NotNow(Exception):
    """A fork of the trainer is not safe now (_Zygote(fork_only=True))."""


class _Zygote:
    """The zygote process and the trainer's end of its control socket.

    Forked from the trainer at ``import ringloader`` when that is safe: one
    thread (no lock can be held by a thread the fork loses) and CUDA
    untouched (the reason workers are never forked from a trainer that
    trains). It is ready at once with what the trainer imported so far,
    and it never runs the trainer's code afterwards. Otherwise (threads or
    CUDA already there: a notebook kernel), or with
    $RINGLOADER_ZYGOTE=spawn, it is spawned (``python -c``) and imports
    torch in the background: about a second later to the first batch when
    a loader is built right after the import (bench/first_batch.py)."""

    def __init__(self, fork_only=False):
        """`fork_only`: a fork of the trainer or nothing (NotNow), for a
        loader's own zygote (_trainer/warm_zygote.py)."""
        fork = _fork_is_safe()
        if fork_only and not fork:
            raise NotNow("forking the trainer is not safe now")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.owner = os.getpid()
        self.ready = False
        self.process = None
        self.pid = None
        self.lock = threading.Lock()  # one fork_server at a time
        if fork:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the zygote: never returns
                ours.close()
                os.environ[_ZYGOTE_ENV] = "1"
                _fork_hygiene.forget_partial_imports()
                _zygote.zygote_main(theirs.detach(), self.owner)
            self.pid = pid
        else:
            code = (f"import sys; sys.path.insert(0, {_PACKAGE_PARENT!r}); "
                    "from ringloader._workers.zygote import zygote_main; "
                    f"zygote_main({theirs.fileno()}, {self.owner})")
            env = dict(os.environ, **{_ZYGOTE_ENV: "1"})
            self.process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env,
                stdin=subprocess.DEVNULL)
        theirs.close()
        self.control = ours
        # The zygote ends when this end closes; closed here before the
        # interpreter's collector would (a ResourceWarning under -X dev).
        atexit.register(self.control.close)

    def alive(self):
        if self.owner != os.getpid():
            return False  # a fork of the trainer: its zygote is the parent's
        if self.process is not None:
            return self.process.poll() is None
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:  # reaped by someone else's os.wait()
            return False

    def fork_server(self, records_fd):
        """A new loader server, holding `records_fd` (the worker end of its
        loader's exception-record channel); returns the trainer's end of
        its socket and the server's pid.
        Raises WorkerError when the zygote is not ready, or forks no
        server, within the timeout (and kills it: the next loader starts
        another)."""
        timeout = _timeout_s()
        if not self.ready:
            if self._wait(self.control, timeout, "the zygote to be ready") != b"R":
                raise EOFError("zygote failed to start")
            self.ready = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(self.control, [b"S"], [theirs.fileno(), records_fd])
        finally:
            theirs.close()
        try:
            if self._wait(ours, timeout, "the zygote to start a loader server") != b"H":
                raise EOFError("loader server failed to start")
            (pid,) = struct.unpack("<q", _zygote.recv_exact(ours, 8))  # sent with b"H"
        except BaseException:
            ours.close()
            raise
        return ours, _ServerProcess(pid, self.pid or self.process.pid)

    def _wait(self, sock, timeout, what):
        """One byte from `sock` (b"" at its end), within `timeout`."""
        if not select.select([sock], [], [], timeout)[0]:
            self.kill()
            raise WorkerError(
                f"ringloader: waited {timeout:g} s for {what} (zygote pid "
                f"{self.pid or self.process.pid}); it is killed, the next loader starts "
                f"another. A slow start (torch imported from a slow file system) "
                f"needs a longer ${_TIMEOUT_ENV}")
        return sock.recv(1)

    def kill(self):
        pid = self.pid if self.pid is not None else self.process.pid
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.process is not None:
            self.process.wait()
        else:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.owner = -1  # dead: alive() is False


def _timeout_s():
    try:
        value = float(os.environ.get(_TIMEOUT_ENV, _DEFAULT_TIMEOUT_S))
    except ValueError:
        raise OptionError(f"ringloader: ${_TIMEOUT_ENV} must be a number of seconds, "
                          f"got {os.environ[_TIMEOUT_ENV]!r}") from None
    if not value > 0:
        raise OptionError(f"ringloader: ${_TIMEOUT_ENV} must be > 0, got {value:g}")
    return value


def _private_bytes():
    """This process's anonymous resident memory (RssAnon), 0 if unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _fork_is_safe():
    """Forking the trainer is safe while it runs one thread (idle threads
    of OpenBLAS, jemalloc and tqdm aside: _fork_threads) and has not
    initialised CUDA (what torch's own fork start method assumes too).
    It is also cheap only while the trainer is small: see
    _FORK_MAX_PRIVATE_BYTES."""
    if os.environ.get("RINGLOADER_ZYGOTE") == "spawn":
        return False
    if _fork_threads.other_threads_unsafe():
        return False
    cuda = sys.modules.get("torch.cuda")
    if cuda is not None and cuda.is_initialized():
        return False
    return _private_bytes() <= _FORK_MAX_PRIVATE_BYTES


class _ServerProcess:
    """A loader server's pid, held as a pidfd taken while the server was
    known to be the zygote's child, so kill() can never reach a process
    that reused its pid."""

    def __init__(self, pid, zygote_pid):
        self.pid, self._pidfd = pid, None
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # gone already, or a kernel without pidfds
            return
        if _stub_gate.parent_of(pid) == zygote_pid:
            self._pidfd = pidfd
        else:
            os.close(pidfd)

    def kill(self):
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.close()

    def close(self):
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


_lock = threading.Lock()
_zygote_process = None


def prestart():
    """Starts the zygote in the background (it imports torch, ~1 s, while
    the trainer goes on), so the first loader finds it ready. Called at
    ``import ringloader``; $RINGLOADER_PRESTART=0 defers it to the first
    loader with a Python dataset."""
    if os.environ.get(_ZYGOTE_ENV) or os.environ.get("RINGLOADER_PRESTART") == "0":
        return
    try:
        _zygote_for_use()
    except OSError:
        pass  # started again, and reported, when a loader needs it


def _zygote_for_use():
    global _zygote_process
    with _lock:
        if _zygote_process is None or not _zygote_process.alive():
            _zygote_process = _Zygote()
        return _zygote_process


def _start_server(records_fd, zygote=None):
    """A new loader server: the trainer's end of its socket, _ServerProcess.
    From `zygote` (a loader's own, _trainer/warm_zygote.py) while it lives,
    else from the trainer's. Refused before any fork when the stub its
    workers need is missing."""
    if not os.access(_STUB, os.X_OK):
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
        zygote = _zygote_for_use()
        try:
            with _lock:
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
                      "seeding": seeding}
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
            self._forked = (records, _start_server(records.worker_end(), self.zygote))
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
            server, process = forked or _start_server(records_fd, self.zygote)
            forked = None
            server.settimeout(bound_s or None)
            try:
                _zygote.send_frame(server, pickle.dumps(header))
                _zygote.send_frame(server, self.payload)
                reply = pickle.loads(_zygote.recv_frame(server))
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
                raise WorkerError(f"ringloader: Python workers' loader server died: "
                                  f"{error}") from error
            process.close()
            server.settimeout(None)
            return server, reply

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
