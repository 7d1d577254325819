# SPDX-License-Identifier: BSD-3-Clause
"""A loader's own zygote, forked by the trainer's zygote (zygote.py) on
message b"Z", for a trainer that cannot be forked itself (threads, CUDA:
_trainer/warm_zygote.py). The trainer's zygote lacks every module the
trainer imported after ``import ringloader``; this one imports the loader's
once, by unpickling its dataset, so each epoch's servers import nothing.
"""
import gc
import os
import pickle
import socket
import struct
import sys
import traceback

from ringloader._workers import zygote as _zygote


def fork(control, fds):
    """A loader's own zygote (_trainer/warm_zygote.py), for a trainer that
    cannot be forked itself: it sends its pid, unpickles the loader's
    dataset once (importing what it needs: the servers it forks then import
    nothing) and serves as this zygote does, on fds[0]."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        control.close()
        _zygote._close_fds(fds[1:])
        _zygote.die_with_parent()
        _zygote.set_name("rl-zygote")
        try:
            with socket.socket(fileno=fds[0]) as own:
                own.sendall(struct.pack("<q", os.getpid()))
                header = pickle.loads(_zygote.recv_frame(own))
                _zygote.apply_header(header)
                payload = _zygote.recv_frame(own)
                try:
                    pickle.loads(payload)  # for its imports: the copy is dropped
                except Exception:  # noqa: BLE001  (each server reports it, as before)
                    pass
                del payload
                gc.collect()
                _zygote._serve(own)
        except BaseException:  # noqa: BLE001  (a forked child must not return)
            traceback.print_exc()
        finally:
            os._exit(0)
    _zygote._close_fds(fds)
