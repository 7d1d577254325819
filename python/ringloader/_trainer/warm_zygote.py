# SPDX-License-Identifier: BSD-3-Clause
"""A loader's own zygote, and its workers started side by side.

The trainer's zygote (_python_workers._Zygote) is forked at ``import
ringloader``: it lacks every module the trainer imported after that
(``datasets``, ``webdataset``, pyarrow...), so each loader server imports
them again while it unpickles the dataset: a second or more per server,
paid at every ``iter()`` of an IterableDataset loader, whose workers torch
re-creates each epoch. torch's workers are forks of the trainer, which has
those modules already.

So a loader over an IterableDataset forks a zygote of its own from the
trainer when it is built, if that is safe then (one thread, CUDA
untouched, a small heap: _python_workers._fork_is_safe, the rule the
trainer's zygote follows), and again at a later ``iter()`` if it was not.
It holds every module the trainer had imported, and forks that loader's
servers for as long as the loader lives. Each epoch's servers still
unpickle the dataset as it is at that ``iter()``: a fresh copy for every
worker, as torch's re-created workers get. Where no fork is safe, the
trainer's zygote serves, as before.

The workers of one ``iter()`` start side by side (start_all): each waits
on its own server, so N workers take the time of one.
"""
import atexit
import threading
import weakref

from ringloader._trainer import python_workers as _python_workers


class LoaderZygote:
    """The zygote of one loader: forked on demand, killed with the loader."""

    def __init__(self):
        self._zygote = None
        self._finalizer = None

    def get(self):
        """The live zygote, forked now if there is none and the trainer may
        be forked now; else None (the trainer's zygote serves)."""
        zygote = self._zygote
        if zygote is not None and zygote.alive():
            return zygote
        self.close()
        try:
            zygote = _python_workers._Zygote(fork_only=True)
        except (_python_workers.NotNow, OSError):
            return None
        self._zygote = zygote
        self._finalizer = weakref.finalize(self, _end, zygote)
        return zygote

    @property
    def pid(self):
        """Its pid while it lives, else None."""
        zygote = self._zygote
        return zygote.pid if zygote is not None and zygote.alive() else None

    def close(self):
        if self._finalizer is not None:
            self._finalizer()
        self._zygote = self._finalizer = None


def _end(zygote):
    """Kills and reaps it (the servers it forked live on: each ends with its
    own loader's socket)."""
    if zygote.alive():
        zygote.kill()
    atexit.unregister(zygote.control.close)
    zygote.control.close()


def start_all(starts):
    """Calls each of `starts` in a thread of its own and waits for all;
    raises the first one's exception after all have ended."""
    errors = [None] * len(starts)

    def run(index):
        try:
            starts[index]()
        except BaseException as error:  # noqa: BLE001  (raised below, in the caller)
            errors[index] = error

    threads = [threading.Thread(target=run, args=(index,), daemon=True,
                                name=f"ringloader-start-{index}")
               for index in range(1, len(starts))]
    for thread in threads:
        thread.start()
    if starts:
        run(0)  # the first in this thread
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
