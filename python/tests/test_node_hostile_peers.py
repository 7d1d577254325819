# SPDX-License-Identifier: BSD-3-Clause
"""The node loader against hostile *admitted* peers and other users (issue
42, items 3 and 8): silent connections and reconnect loops from a member of
``allow_group`` delay no attach and no detach; a node that never answers
does not hang a trainer; floods of refused peers do not flood the log; a
name another user bound first, and a group number out of range, are clear
errors."""
import json
import os
import subprocess
import textwrap
import time

import pytest

import ringloader
from conftest import NOBODY
from node_helpers import _name, _dataset, _python
from test_node_trust import _python_as

# Five connections that never say a word, then a loop that connects, waits
# a little and reconnects, until killed: uid 65534, admitted by allow_group.
SILENT = textwrap.dedent("""
    import socket, time
    name = "{name}"
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0ringloader/" + name)
        return s
    silent = [connect() for _ in range(5)]
    print("ready", flush=True)
    while True:
        s = connect()
        time.sleep(0.05)
        s.close()
""")


def _silent_peers(name):
    peers = _python_as(NOBODY, SILENT.replace("{name}", name), stdlib_only=True)
    assert peers.stdout.readline().strip() == "ready", peers.stderr.read()
    time.sleep(0.2)  # the node has accepted them
    return peers


def _stop(process):
    process.kill()
    process.wait()


@pytest.mark.cross_user
def test_silent_admitted_peers_do_not_delay_an_attach(image_folder):
    """The old attach thread read each connection with a blocking 2 s
    receive: five silent peers cost a trainer's attach 10 s."""
    name = _name("silent-attach")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2, allow_group=NOBODY) as node:
        node.start()
        peers = _silent_peers(name)
        try:
            start = time.monotonic()
            loader = ringloader.DataLoader(attach=name, trainer=0, connect_timeout=30)
            took = time.monotonic() - start
            assert next(iter(loader))[0].shape == (2, 3, 24, 24)
        finally:
            _stop(peers)
    # Generous: an attach takes milliseconds; the old code took 10 s or more.
    assert took < 2.0, f"attach behind 5 silent peers took {took:.2f} s"


HOLDER = """
    import ringloader, sys, time
    loader = ringloader.DataLoader(attach="{name}")
    kept = next(iter(loader))
    print("holding", flush=True)
    time.sleep(600)
"""

TIMED = """
    import ringloader, time
    loader = ringloader.DataLoader(attach="{name}")
    for images, labels in loader:
        print("batch", time.monotonic(), flush=True)
"""


@pytest.mark.cross_user
def test_a_dead_trainers_detach_does_not_wait_behind_silent_peers(image_folder):
    """Trainer 1 holds its lane's slots, so the node (dealing in lockstep)
    waits for it and trainer 0 waits too; trainer 1 is killed: its detach
    frees the node and trainer 0's next batch comes at once (the old code
    detached it only after the silent peers' 2 s timeouts: 11 s)."""
    name = _name("silent-detach")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               trainers=2, name=name, lane_slots=2, epochs=1,
                               allow_group=NOBODY) as node:
        node.start()
        holder = _python(HOLDER.format(name=name), LOCAL_RANK=1)
        timed = _python(TIMED.format(name=name), LOCAL_RANK=0)
        peers = None
        try:
            assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
            # Lane 0 gets its batches up to the node's wait for lane 1.
            before = [timed.stdout.readline() for _ in range(3)]
            assert all(line.startswith("batch") for line in before), before
            time.sleep(0.3)
            peers = _silent_peers(name)
            killed = time.monotonic()
            holder.kill()
            line = timed.stdout.readline()
            assert line.startswith("batch"), (line, timed.stderr.read())
            waited = float(line.split()[1]) - killed
        finally:
            for process in (holder, timed) + ((peers,) if peers else ()):
                _stop(process)
    assert waited < 2.0, f"lane 0's next batch came {waited:.2f} s after trainer 1 died"


def test_a_node_that_never_answers_does_not_hang_its_trainer():
    """Whoever holds the name (here: a socket that listens and never
    answers) cannot make the trainer wait forever for its attach reply."""
    import socket
    name = _name("mute-node")
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind("\0ringloader/" + name)
    mute.listen(4)
    try:
        trainer = _python(f"""
            import ringloader, time
            start = time.monotonic()
            try:
                ringloader.DataLoader(attach="{name}", trainer=0, connect_timeout=1)
                print("ATTACHED")
            except ringloader.NodeError as error:
                print("NodeError", round(time.monotonic() - start, 2), error)
        """)
        try:
            out, err = trainer.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            _stop(trainer)
            pytest.fail("the trainer still waits for a node that never answers after 30 s")
    finally:
        mute.close()
    assert out.startswith("NodeError"), out + err
    assert "did not answer" in out and f"@ringloader/{name}" in out, out


@pytest.mark.cross_user
def test_refused_peers_are_logged_at_most_once_a_second(image_folder, capfd):
    name = _name("refused-log")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2) as node:
        node.start()
        flood = _python_as(NOBODY, f"""
            import socket
            for _ in range(200):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect("\\0ringloader/{name}")
                s.recv(320)   # the refusal: the node has handled this one
                s.close()
            print("done", flush=True)
        """, stdlib_only=True)
        out, err = flood.communicate(timeout=120)
        assert out.strip() == "done", err
        assert node.stats()["attaches"] == 0
    lines = [line for line in capfd.readouterr().err.splitlines() if "refused a trainer" in line]
    assert 1 <= len(lines) <= 5, f"{len(lines)} log lines for 200 refused peers"
    assert "uid 65534" in lines[0]


@pytest.mark.cross_user
def test_a_name_another_user_bound_first_is_a_clear_error(image_folder):
    name = _name("taken")
    squatter = _python_as(NOBODY, f"""
        import socket, time
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\\0ringloader/{name}")
        s.listen(4)
        print("bound", flush=True)
        time.sleep(600)
    """, stdlib_only=True)
    try:
        assert squatter.stdout.readline().strip() == "bound"
        with pytest.raises(ValueError) as error:
            ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                                  name=name)
    finally:
        _stop(squatter)
    message = str(error.value)
    assert "uid 65534" in message and "another user" in message, message
    assert "name=" in message, message  # the option that picks another name


@pytest.mark.parametrize("group", ["4294967296", "4294967295", "18446744073709551616"])
def test_a_group_number_out_of_range_is_refused(image_folder, group):
    """strtoul took "4294967296" for gid 0: root's group was let in."""
    with pytest.raises(ValueError, match=f"allow_group.*{group}"):
        ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                              name=_name("gid"), allow_group=group)
