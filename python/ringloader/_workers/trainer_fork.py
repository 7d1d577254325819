# SPDX-License-Identifier: BSD-3-Clause
"""The child side of the loader servers forked when an IterableDataset
loader is built (_trainer/warm_zygote.py, fork_servers). The trainer forks
the first, which sheds what is the trainer's, as a zygote forked from the
trainer does (_workers/zygote.py), and serves as any loader server; it
forks the others, each a server of one worker too.

Each forks its worker's spare before the dataset comes (one fork fewer
after iter()). The first forks the others while it waits for its payload,
and those left once it has replied: a fork never delays its reply by more
than one fork. It waits for them before it ends, so none is left for an
init that may never reap it."""
import os
import select
import signal
import traceback

from ringloader._workers import zygote as _zygote
from ringloader._workers.fork_hygiene import (drop_inherited_descriptors,
                                              forget_partial_imports, leave_trainers_signals,
                                              set_name)


def serve(channels):
    """`channels`: (trainer socket fd, records fd) of each server, the
    first this process's. Never returns."""
    try:
        set_name("rl-server")
        forget_partial_imports()
        drop_inherited_descriptors({0, 1, 2, *(fd for channel in channels for fd in channel)})
        leave_trainers_signals()
    except BaseException:  # noqa: BLE001  (a forked child must not return)
        traceback.print_exc()
        os._exit(1)
    _zygote.run_server(*channels[0], make=lambda trainer, records: BuiltServer(
        trainer, records, channels[1:]))


class BuiltServer(_zygote.LoaderServer):
    """A server forked when its loader was built (see above); `siblings`:
    the channels of the servers it forks."""

    def __init__(self, trainer, records, siblings=()):
        super().__init__(trainer, records)
        self.sibling_channels = list(siblings)  # not forked yet
        self.siblings = []                      # forked: their pids

    def before_load(self):
        self._fork_spare(budget=1)  # its one worker's
        while self.sibling_channels and not select.select([self.trainer], [], [], 0)[0]:
            self._fork_sibling()

    def after_reply(self):
        while self.sibling_channels:
            self._fork_sibling()

    def close(self):
        super().close()
        for pid in self.siblings:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # reaped already (_reap)

    def _fork_sibling(self):
        channel = self.sibling_channels.pop(0)
        pid = os.fork()
        if pid == 0:  # never returns
            try:
                self._shed_for(channel)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
                os._exit(1)
            _zygote.run_server(*channel, make=BuiltServer)
        for fd in channel:
            os.close(fd)
        self.siblings.append(pid)

    def _shed_for(self, channel):
        """In a sibling: nothing of this server's but `channel`."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for spare in self.spares:
            spare.control.close()
        for sock in (self.trainer, self.listener):
            if sock is not None:
                sock.close()
        for fd in (self.records, self.renewal_fd, *self.wake,
                   *(fd for other in self.sibling_channels for fd in other)):
            if fd is not None:
                os.close(fd)
