# SPDX-License-Identifier: BSD-3-Clause
"""The trainer's zygote: the process every loader server is forked from
(_workers/zygote.py is its other side), and the trainer's rules for when a
fork of the trainer is safe.

One zygote per trainer process (``zygote_for_use``), started at ``import
ringloader`` (``prestart``); a loader may have one of its own, forked
later from the trainer (_trainer/warm_zygote.py). A zygote forks a server
on request (``_Zygote.fork_server``, or ``request_server`` now and
``await_server`` later, so the fork overlaps the trainer's own work)."""
import atexit
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading

from ringloader._trainer import fork_threads as _fork_threads
from ringloader._workers import fork_hygiene as _fork_hygiene
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import frames as _frames
from ringloader._workers import zygote as _zygote
from ringloader._ringloader import OptionError, WorkerError

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ringloader/
_PACKAGE_PARENT = os.path.dirname(_PACKAGE)

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
        return self.await_server(self.request_server(records_fd))

    def request_server(self, records_fd):
        """Asks for a server (see fork_server) without waiting for it, nor
        for the zygote to be ready: the trainer's end of its socket, for
        await_server."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(self.control, [b"S"], [theirs.fileno(), records_fd])
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours

    def await_server(self, ours):
        """fork_server's result for a request_server socket."""
        timeout = _timeout_s()
        try:
            self.wait_ready(timeout)
            if self._wait(ours, timeout, "the zygote to start a loader server") != b"H":
                raise EOFError("loader server failed to start")
            (pid,) = struct.unpack("<q", _frames.recv_exact(ours, 8))  # sent with b"H"
        except BaseException:
            ours.close()
            raise
        return ours, _ServerProcess(pid, self.pid or self.process.pid)

    def wait_ready(self, timeout):
        """Returns once the zygote has said it is ready (its imports done);
        EOFError if it ended first, WorkerError past `timeout`."""
        if not self.ready:
            if self._wait(self.control, timeout, "the zygote to be ready") != b"R":
                raise EOFError("zygote failed to start")
            self.ready = True

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

    def alive(self):
        """Not ended (False where no pidfd could be held on it)."""
        return self._pidfd is not None and not select.select([self._pidfd], [], [], 0)[0]

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


lock = threading.Lock()
_zygote_process = None

# Loader servers forked from the trainer itself (_warm_zygote.EarlyServer):
# the trainer's children, so the trainer reaps them once they end (each
# ends with its loader's socket). A pidfd each, so a reap can never take a
# child of the user's that reused a pid.
_own_servers = set()  # pidfds
_own_servers_lock = threading.Lock()


def adopt_server(pidfd):
    """Reaps the child `pidfd` holds once it has ended (reap_servers), and
    closes `pidfd` then."""
    with _own_servers_lock:
        _own_servers.add(pidfd)


def reap_servers():
    """Reaps the adopted servers that have ended, without waiting."""
    with _own_servers_lock:
        for pidfd in list(_own_servers):
            try:
                ended = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG) is not None
            except OSError:  # ChildProcessError: someone's os.wait() reaped it
                ended = True
            if ended:
                os.close(pidfd)
                _own_servers.discard(pidfd)


def prestart():
    """Starts the zygote in the background (it imports torch, ~1 s, while
    the trainer goes on), so the first loader finds it ready. Called at
    ``import ringloader``; $RINGLOADER_PRESTART=0 defers it to the first
    loader with a Python dataset.

    It does not gc.freeze() the trainer: that would keep whatever the
    user's program made before ``import ringloader`` from ever being
    collected. (Tried, it kept the pages a fork shares from being copied,
    Hugging Face's first batch 1.19 -> 0.97 s, and the pytest runs of the
    stream tests crashed in the collector 4 times in 7; the crashes were
    CPython 3.12.1's BytesIO bug that torch's own loader trips, found
    later: tests/bytesio_export_workaround.py.) ``python -m ringloader``
    freezes what is alive before the script runs (__main__.py)."""
    if os.environ.get(_ZYGOTE_ENV) or os.environ.get("RINGLOADER_PRESTART") == "0":
        return
    try:
        zygote_for_use()
    except OSError:
        pass  # started again, and reported, when a loader needs it


def zygote_for_use():
    """The trainer's zygote, started if it is not alive."""
    global _zygote_process
    with lock:
        if _zygote_process is None or not _zygote_process.alive():
            _zygote_process = _Zygote()
        return _zygote_process
