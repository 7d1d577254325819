# SPDX-License-Identifier: BSD-3-Clause
"""The loader server (python/ringloader/_workers/zygote.py) serves only its own
trainer's stubs. Its abstract socket name is public (/proc/net/unix), so
each test attacks it by name, as another user (`nobody`) and as the same
user, then checks that the trainer's next epochs, one with a worker killed
and respawned (the server must serve the new stub), still give the right
bytes. Also: a stub hands nothing to a server that is not its trainer's, the
trainer's wait for its zygote and loader server is bounded, and the zygote
(a fork of the trainer) holds none of the trainer's descriptors."""
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import ringloader
from conftest import NOBODY, env_importing_ringloader, python_for_nobody

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACK = os.path.join(HERE, "server_trust_attack.py")
TRAINER = os.path.join(HERE, "server_trust_trainer.py")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(ringloader.__file__)))

needs_root = pytest.mark.cross_user  # as nobody: needs root (conftest.py counts it)


def _python_for_nobody():
    """The attacks need the standard library only: any Python will do."""
    if os.geteuid() != 0:  # attacks as the same user only
        return sys.executable
    python = python_for_nobody(stdlib_only=True)
    assert python, f"no Python that uid {NOBODY} can run"
    return python


def _attack_command(address, *args):
    # -c: `nobody` need not be able to read this tree.
    with open(ATTACK) as source:
        return [_python_for_nobody(), "-S", "-c", source.read(), address, *args]


def _as_nobody(address, *args, wait=True):
    options = dict(user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait:
        return subprocess.run(_attack_command(address, *args), timeout=120, **options)
    return subprocess.Popen(_attack_command(address, *args), **options)


class Trainer:
    """server_trust_trainer.py, driven line by line."""

    def __init__(self, env=None):
        env = dict(env or {}, RINGLOADER_TEST_NOBODY_PYTHON=_python_for_nobody())
        self.process = subprocess.Popen(
            [sys.executable, TRAINER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env_importing_ringloader(env), cwd=HERE)
        self.buffer = b""
        self.address = self.expect("ADDRESS")[0]
        self.stubs = [int(pid) for pid in self.expect("STUBS")]

    @property
    def server_pid(self):
        return int(self.address.split("-")[1])

    def expect(self, word, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                words = line.decode().split()
                if words and words[0] == word:
                    return words[1:]
                continue
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            chunk = os.read(self.process.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                self.process.kill()
                raise AssertionError(f"trainer: no {word} line; stderr:\n"
                                     f"{self.process.stderr.read().decode()[-3000:]}")
            self.buffer += chunk

    def send(self, line):
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def child(self, *args, nobody=False):
        """Runs an attack as the trainer's own child (same uid, or `nobody`)."""
        self.send(" ".join(["nobody-child" if nobody else "child", *args]))
        return self.expect("CHILD")

    def finish(self, timeout=120):
        """Goes on to the epochs; returns (exit code, stdout, stderr), exit
        code None when they did not end within `timeout`."""
        self.send("go")
        try:
            out, err = self.process.communicate(timeout=timeout)
            code = self.process.returncode
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            code = None
        return code, self.buffer.decode() + out.decode(), err.decode()

    def token(self):
        """The stubs' secret, read as root from the trainer's config memfd
        (a same-uid process can read it; `nobody` cannot)."""
        folder = f"/proc/{self.process.pid}/fd"
        for name in os.listdir(folder):
            try:
                target = os.readlink(f"{folder}/{name}")
            except OSError:
                continue
            if target.startswith("/memfd:ringloader-config"):
                with open(f"{folder}/{name}", "rb") as memfd:
                    return memfd.read().decode()
        return "0" * 64


def _assert_epochs_ok(trainer):
    code, out, err = trainer.finish()
    assert code == 0 and "EPOCH-OK" in out, (
        f"trainer exit {code} (None: still running after 120 s)\n{out}\n{err[-3000:]}")


@needs_root
def test_other_user_gets_no_worker_even_with_the_token():
    trainer = Trainer()
    attack = _as_nobody(trainer.address, "serve-me", trainer.token())
    assert attack.stdout.strip() == "REFUSED", (attack.stdout, attack.stderr)
    # Even as the trainer's own child, with the token (as if it leaked):
    # the uid alone refuses it.
    assert trainer.child("serve-me", trainer.token(), nobody=True) == ["REFUSED"]
    _assert_epochs_ok(trainer)


@needs_root
def test_malformed_messages_cost_one_connection_not_the_server():
    trainer = Trainer()
    attack = _as_nobody(trainer.address, "garbage")
    assert attack.stdout.strip() == "REFUSED", (attack.stdout, attack.stderr)
    # From the trainer's own child, past the uid and parent checks: the
    # messages themselves are parsed, and refused.
    assert trainer.child("garbage") == ["REFUSED"]
    _assert_epochs_ok(trainer)


@needs_root
def test_silent_connections_do_not_stall_the_server():
    trainer = Trainer()
    silent = _as_nobody(trainer.address, "silent", wait=False)
    try:
        assert silent.stdout.readline().strip() == "CONNECTED", silent.stderr.read()
        assert trainer.child("silent") == ["CONNECTED"]  # held by the trainer too
        _assert_epochs_ok(trainer)
    finally:
        silent.kill()
        silent.wait()


def test_same_uid_child_with_a_wrong_token_is_refused():
    trainer = Trainer()
    assert trainer.child("serve-me", "00" * 32) == ["REFUSED"]
    _assert_epochs_ok(trainer)


def test_same_uid_stranger_is_refused_even_with_the_token():
    """This test process is the trainer's parent, not a process the
    trainer's pool started."""
    trainer = Trainer()
    attack = subprocess.run(_attack_command(trainer.address, "serve-me", trainer.token()),
                            capture_output=True, text=True, timeout=120)
    assert attack.stdout.strip() == "REFUSED", (attack.stdout, attack.stderr)
    _assert_epochs_ok(trainer)


@needs_root
def test_stub_hands_nothing_to_another_users_server_on_its_name():
    """The server died; `nobody` binds its (public) name before the pool
    respawns a stub. The stub must not hand it the ring."""
    trainer = Trainer()
    os.kill(trainer.server_pid, signal.SIGKILL)
    impostor = _as_nobody(trainer.address, "impostor", wait=False)
    try:
        assert impostor.stdout.readline().strip() == "BOUND", impostor.stderr.read()
        code, out, err = trainer.finish()
        got = impostor.communicate(timeout=60)[0].split()
    finally:
        impostor.kill()
    # A stub did connect (the test proves nothing otherwise), and hung up
    # handing nothing over, saying whom it refused.
    assert got == ["CONNECTED", "GOT-FDS", "0"], got
    assert f"is held by pid {impostor.pid} uid {NOBODY}, not the loader server" in err, \
        err[-3000:]
    assert code not in (0, None), (out, err)  # the loader failed, and said so
    assert "WorkerError" in err, err[-3000:]


STALLED_ZYGOTE = textwrap.dedent("""
    import os, signal, sys, time, torch
    import ringloader
    from ringloader._trainer import zygote_process as _zygote_process

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.full((2,), float(i))

    if sys.argv[1] == "stopped":  # ready once, then stopped (swapped out, traced)
        list(ringloader.DataLoader(Numbers(), batch_size=4, num_workers=1))
        os.kill(_zygote_process._zygote_process.pid, signal.SIGSTOP)
        # A thread of the trainer's own: no loader's zygote can be forked
        # from it, so the stopped zygote is the one asked for a server.
        import threading
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    os.environ["RINGLOADER_ZYGOTE_TIMEOUT_S"] = "2"
    start = time.monotonic()
    try:
        list(ringloader.DataLoader(Numbers(), batch_size=4, num_workers=1))
        print("NO-ERROR")
    except ringloader.WorkerError as error:
        print(f"WorkerError after {time.monotonic() - start:.1f} s: {error}")
""")

# A zygote that never gets to be ready (as on an import from a dead mount);
# it goes when the trainer does.
SLOW_SITE = textwrap.dedent("""
    import os, time
    if os.environ.get("RINGLOADER_IN_ZYGOTE"):
        parent = os.getppid()
        while os.getppid() == parent:
            time.sleep(0.1)
""")


@pytest.mark.parametrize("how", ["stopped", "never_ready"])
def test_wait_for_zygote_and_loader_server_is_bounded(tmp_path, how):
    env = {}
    if how == "never_ready":
        (tmp_path / "sitecustomize.py").write_text(SLOW_SITE)
        env = {"RINGLOADER_ZYGOTE": "spawn",
               "PYTHONPATH": os.pathsep.join([str(tmp_path), PACKAGE_PARENT])}
    try:
        result = subprocess.run([sys.executable, "-c", STALLED_ZYGOTE, how], env=env_importing_ringloader(env),
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as error:
        raise AssertionError(f"{how}: the trainer still waited after 60 s") from error
    line = result.stdout.strip()
    assert line.startswith("WorkerError after"), (line, result.stderr[-3000:])
    assert float(line.split()[2]) < 10, line
    waited_for = "loader server" if how == "stopped" else "zygote"
    assert waited_for in line and "RINGLOADER_ZYGOTE_TIMEOUT_S" in line, line


HOLDS_A_LOCK = textwrap.dedent("""
    import fcntl, os, sys, torch
    lock = open(sys.argv[1], "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    import ringloader  # forks the zygote, while the lock is held
    from ringloader._trainer import zygote_process as _zygote_process

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.full((2,), float(i))

    loader = ringloader.DataLoader(Numbers(), batch_size=4, num_workers=1,
                                   persistent_workers=True)
    list(loader)  # the zygote ready, a server and a worker running
    zygote = _zygote_process._zygote_process
    assert zygote.pid is not None, "the zygote was spawned, not forked"
    lock.close()  # the trainer lets go of its lock
    again = open(sys.argv[1], "w")
    try:
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("LOCK-FREE")
    except BlockingIOError:
        print("LOCK-HELD")
    # The trainer's zygote and the loader's own (a later fork of the
    # trainer), their servers and the workers: every descendant.
    family = {os.getpid()}
    for _ in range(4):
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) in family:
                        family.add(int(name))
            except (OSError, ValueError):
                pass
    family.discard(os.getpid())
    for pid in sorted(family):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == os.path.realpath(sys.argv[1]):
                    print("HOLDER", pid, fd)
            except OSError:
                pass
    print("FAMILY", len(family))
""")


def test_zygote_keeps_none_of_the_trainers_descriptors(tmp_path):
    result = subprocess.run([sys.executable, "-c", HOLDS_A_LOCK, str(tmp_path / "lock")],
                            env=env_importing_ringloader({"RINGLOADER_ZYGOTE": ""}), capture_output=True,
                            text=True, timeout=120)
    out = result.stdout
    assert "LOCK-FREE" in out and "HOLDER" not in out, (out, result.stderr[-3000:])
    # The trainer's zygote, the loader's, its server, a worker (and its stub).
    assert int(out.split("FAMILY")[1].split()[0]) >= 4, out


BIG_TRAINER = textwrap.dedent("""
    import torch
    import ringloader
    from ringloader._trainer import zygote_process as _zygote_process

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return torch.full((2,), float(i))

    # As if the trainer held more private memory than a fork should pin
    # (the real limit, 1 GiB, is too much to allocate in a test).
    _zygote_process._FORK_MAX_PRIVATE_BYTES = 1 << 20
    assert [b.tolist() for b in ringloader.DataLoader(Numbers(), batch_size=4,
                                                      num_workers=1)][1][0] == [4.0, 4.0]
    zygote = _zygote_process._zygote_process
    print("SPAWNED" if zygote.pid is None and zygote.process is not None else "FORKED")
""")


def test_a_big_trainer_gets_a_spawned_zygote():
    """A forked zygote keeps a copy of each page of the trainer's the
    trainer later writes or frees: past the limit it is spawned instead."""
    result = subprocess.run([sys.executable, "-c", BIG_TRAINER],
                            env=env_importing_ringloader({"RINGLOADER_PRESTART": "0", "RINGLOADER_ZYGOTE": ""}),
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "SPAWNED", (result.stdout, result.stderr[-3000:])
