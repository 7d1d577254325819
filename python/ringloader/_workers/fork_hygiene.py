# SPDX-License-Identifier: BSD-3-Clause
"""What a process forked from the trainer drops of it before it serves: the
modules whose import was still running, and the descriptors it inherited.
The trainer's zygote (zygote.py) calls both; so does a zygote started by
fork in _trainer/python_workers.py. And what every process the zygote
forks does first: die with its parent, and take a name of its own; and
the trainer's sys.path, directory and environment a server (or a spare
briefed with its payload) takes on before it unpickles (apply_header)."""
import ctypes
import os
import signal
import sys


def forget_partial_imports():
    """In a zygote forked while the trainer was importing (``import
    ringloader`` at the top of the user's module): modules whose import was
    still running lack what their body defines later (the dataset class).
    Drop them, so unpickling imports them afresh. ringloader itself is
    complete (prestart is the last line of its __init__).

    The modules dropped stay referenced, and everything the trainer made is
    frozen out of the garbage collector (gc.freeze): no finaliser of the
    trainer's objects runs in this fork, and collections do not write to
    (and so copy) the pages it shares with the trainer."""
    import gc
    for name in _names_being_imported():
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if (getattr(spec, "_initializing", False) and name != "ringloader"
                and not name.startswith("ringloader.")):
            _DROPPED.append(sys.modules.pop(name))
    gc.freeze()


_DROPPED = []


def _names_being_imported():
    """The modules whose import is running: those whose import lock is
    alive (importlib takes one per module for the whole of its import, and
    drops it after). Not a look at every module in sys.modules: that
    touches each module object, and in a fork each touch copies a page the
    trainer shares (11-17 ms with torch and datasets imported, on the way
    to a loader's first batch). The full look where importlib has no such
    table."""
    locks = _import_locks()
    if locks is None:
        return list(sys.modules)
    return [name for name, lock in list(locks.items()) if lock() is not None]


def _import_locks():
    """importlib's table of module name -> weak reference to its import
    lock (CPython 3.3 on), or None."""
    try:
        from importlib import _bootstrap
        return _bootstrap._module_locks
    except (ImportError, AttributeError):
        return None


def drop_inherited_descriptors(keep):
    """A forked zygote starts with every descriptor the trainer had at
    ``import ringloader``: files (and the flock locks on them), sockets,
    pipes. Holding them would keep them open, and those locks held, for the
    trainer's whole life, in every server and worker too. Each one not in
    `keep` is pointed at /dev/null rather than closed: its number stays
    taken, so a finaliser of a trainer object that still names it can never
    close a descriptor the zygote opens later."""
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd in keep or fd == null:
                continue
            try:
                os.fstat(fd)  # the listing's own descriptor is closed by now
            except OSError:
                continue
            os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def leave_trainers_signals():
    """A fork of the trainer runs none of the trainer's Python signal
    handlers (a trainer's SIGTERM handler saves a checkpoint: Lightning's),
    and gets a process group of its own: a terminal's Ctrl-C reaches the
    trainer (which shuts its loaders down), not its zygotes, servers and
    workers."""
    for signum in signal.valid_signals():
        try:
            if callable(signal.getsignal(signum)):
                signal.signal(signum, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def set_name(name):
    """The name top and ps -o comm show (a forked zygote's command line is
    still the trainer's)."""
    try:
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def apply_header(header):
    """The trainer's sys.path, working directory and environment, as a
    server's unpickling needs them."""
    sys.path[:] = header["sys_path"] + [p for p in sys.path if p not in header["sys_path"]]
    os.chdir(header["cwd"])
    os.environ.clear()
    os.environ.update(header["environ"])
