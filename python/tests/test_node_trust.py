# SPDX-License-Identifier: BSD-3-Clause
"""The node loader's trust (issue 24): who attaches, what a trainer can
touch, what a hostile trainer, a fork child or a dead trainer leaves the
others."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torchvision.transforms as T

import ringloader
from conftest import NOBODY, python_for_nobody
from node_helpers import (gpu, _name, _dataset, _python, TRAINER, _reference, _node_order, _run_trainers, _check_split)  # noqa: F401

# --- trust (issue 24): who attaches, what a trainer can touch -------------

# Skips unless root; scripts/test.sh counts those that ran (conftest.py).
root_only = pytest.mark.cross_user


def _python_as(user, code, stdlib_only=False, **env):
    # An absolute path to this ringloader: the child starts in "/".
    package = os.path.dirname(os.path.dirname(os.path.abspath(ringloader.__file__)))
    environment = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=package,
                       **{k: str(v) for k, v in env.items()})
    python = sys.executable
    if user == NOBODY:
        python = python_for_nobody(stdlib_only)
        if python is None:
            pytest.skip(f"uid {NOBODY} cannot run {sys.executable} (a virtual "
                        "environment in root's home), and this child imports torch")
    return subprocess.Popen([python, "-c", textwrap.dedent(code)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            user=user, group=user, extra_groups=[] if user else None, cwd="/")


# A raw trainer: the attach protocol by hand (node_socket.h), so a test can
# hold the node's descriptors itself.
RAW_ATTACH = textwrap.dedent("""
    import os, socket, struct, mmap, random, sys, time
    def attach(name, lane):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0ringloader/" + name)
        s.sendall(struct.pack("<IIii", 0x4e4c5241, 4, lane, 0))
        msg, fds, _, _ = socket.recv_fds(s, 320, 3, socket.MSG_WAITALL)
        accepted = struct.unpack_from("<i", msg, 4)[0]
        return s, accepted, fds, msg[80:].split(b"\\0")[0].decode()
""")


@root_only
def test_another_user_cannot_attach(image_folder):
    name = _name("other-user")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2) as node:
        node.start()
        intruder = _python_as(NOBODY, f"""
            import ringloader
            try:
                loader = ringloader.DataLoader(attach="{name}", connect_timeout=10)
                next(iter(loader))
                print("GOT A BATCH")
            except ringloader.NodeError as error:
                print("REFUSED", error)
        """)
        out, err = intruder.communicate(timeout=120)
        assert "REFUSED" in out and "uid 65534" in out, out + err
        assert node.trainer_pids() == [0]
        assert node.stats()["attaches"] == 0
        loader = ringloader.DataLoader(attach=name, trainer=0)  # the node's own uid
        assert next(iter(loader))[0].shape == (2, 3, 24, 24)


@root_only
def test_a_trainer_refuses_a_node_of_another_user():
    name = _name("squatter")
    squatter = _python_as(NOBODY, RAW_ATTACH + textwrap.dedent(f"""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\\0ringloader/{name}")
        s.listen(4)
        print("bound", flush=True)
        while True:
            c, _ = s.accept()
            c.recv(16)
            fd = os.memfd_create("fake")
            os.ftruncate(fd, 4096)
            reply = struct.pack("<Iiii", 0x4e4c5241, 1, 0, os.getpid()).ljust(256, b"\\0")
            socket.send_fds(c, [reply], [fd, fd, fd])
    """), stdlib_only=True)
    try:
        assert squatter.stdout.readline().strip() == "bound"
        with pytest.raises(ringloader.NodeError, match="uid 65534, not uid 0"):
            ringloader.DataLoader(attach=name, trainer=0, connect_timeout=5)
    finally:
        squatter.kill()
        squatter.wait()


def test_trainers_map_the_node_read_only(image_folder):
    """The region and ring descriptors cannot be mapped writable; the region
    not even reopened through /proc (sealed), the ring not by a trainer of
    another uid (mode 0600; the same uid can, docs/gpu.md "Trust")."""
    name = _name("read-only")
    users = [None] + ([NOBODY] if os.geteuid() == 0 else [])
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2, allow_group=NOBODY) as node:
        node.start()
        for user in users:
            probe = _python_as(user, RAW_ATTACH + textwrap.dedent(f"""
                s, accepted, fds, why = attach("{name}", 0)
                assert accepted == 1 and len(fds) == 3, (accepted, fds, why)
                region, control, ring = fds
                for what, fd in (("region", region), ("ring", ring)):
                    size = os.fstat(fd).st_size
                    try:
                        mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                        print(what, "WRITABLE")
                    except PermissionError:
                        print(what, "read-only")
                    try:
                        again = os.open(f"/proc/self/fd/{{fd}}", os.O_RDWR)
                        mmap.mmap(again, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                        print(what, "reopened writable")
                    except PermissionError:
                        print(what, "not reopened")
                mmap.mmap(control, os.fstat(control).st_size)  # its own words: writable
                print("done")
            """), stdlib_only=True)
            out, err = probe.communicate(timeout=120)
            assert probe.returncode == 0, err
            assert "region read-only" in out and "ring read-only" in out, out
            assert "region not reopened" in out, out
            if user == NOBODY:
                assert "ring not reopened" in out, out
            deadline = time.monotonic() + 5
            while node.trainer_pids() != [0] and time.monotonic() < deadline:
                time.sleep(0.02)


HOSTILE = RAW_ATTACH + textwrap.dedent("""
    import select
    name, lane, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rng = random.Random(1)
    deadline = time.monotonic() + seconds
    attaches = 0
    while time.monotonic() < deadline:
        try:
            s, accepted, fds, why = attach(name, lane)
        except OSError:
            time.sleep(0.05)
            continue
        if accepted != 1:
            time.sleep(0.05)
            continue
        attaches += 1
        maps = []
        for fd in fds:
            try:  # every word it can write: only its control memfd
                maps.append(mmap.mmap(fd, os.fstat(fd).st_size))
            except PermissionError:
                pass
        while time.monotonic() < deadline and not select.select([s], [], [], 0)[0]:
            for m in maps:
                for _ in range(64):
                    at = rng.randrange(0, len(m) // 4) * 4
                    m[at:at + 4] = struct.pack("<I", rng.getrandbits(32))
            time.sleep(0.002)
        s.close()
        for fd in fds:
            os.close(fd)
    print("attaches", attaches, flush=True)
""")


def test_a_hostile_trainer_cannot_stop_or_corrupt_the_others(image_folder):
    """Lane 2's "trainer" scribbles random words over everything it can
    write, re-attaching whenever it is detached, while lanes 0 and 1 run two
    epochs: they get every batch, byte for byte."""
    name = _name("hostile")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, shuffle=True,
                               num_workers=2, trainers=3, name=name, seed=7,
                               epochs=2, lane_slots=2) as node:
        node.start()
        hostile = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(HOSTILE), name, "2", "600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            procs = [_python(TRAINER.format(name=name, epochs=2, consume="pass"),
                             LOCAL_RANK=rank) for rank in range(2)]
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, err
                results.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            hostile.kill()
            hostile.wait()
        stats = node.stats()
    assert stats["violations"] >= 1
    expected = _reference(image_folder, lambda e: _node_order(24, 3, 2, e), 2, 2)
    for epoch, batches in enumerate(expected):
        for rank in range(2):
            got = [(s, labels) for e, s, labels in results[rank]["batches"] if e == epoch]
            mine = batches[rank::3]
            assert len(got) == len(mine), (epoch, rank)
            for (s, labels), (want_sum, want_labels) in zip(got, mine):
                assert labels == want_labels
                assert s == pytest.approx(want_sum, rel=1e-6, abs=1e-3)


def test_a_fork_child_does_not_free_its_parents_batch(image_folder):
    name = _name("fork-child")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2, ring_slots=1, epochs=1) as node:
        node.start()
        trainer = _python(f"""
            import gc, os, torch, ringloader
            loader = ringloader.DataLoader(attach="{name}")
            batches = iter(loader)
            kept = next(batches)[0]
            before = kept.clone()
            pid = os.fork()
            if pid == 0:
                del kept, batches  # the child's copies of the parent's batch
                gc.collect()
                os._exit(0)
            os.waitpid(pid, 0)
            for _ in batches:     # the lane wraps its slots many times over
                pass
            print("unchanged" if torch.equal(kept, before) else "OVERWRITTEN")
        """)
        out, err = trainer.communicate(timeout=120)
        assert trainer.returncode == 0, err
        assert out.strip().splitlines()[-1] == "unchanged"


def test_a_dead_trainer_whose_child_holds_its_socket_gives_its_lane_back(image_folder):
    name = _name("pidfd")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=2) as node:
        node.start()
        holder = _python(f"""
            import os, time, ringloader
            loader = ringloader.DataLoader(attach="{name}")
            kept = next(iter(loader))
            child = os.fork()
            if child == 0:        # inherits the attach socket
                time.sleep(60)
                os._exit(0)
            print("holding", child, flush=True)
            time.sleep(60)
        """)
        child = None
        try:
            word, child = holder.stdout.readline().split()
            assert word == "holding"
            assert node.trainer_pids() == [holder.pid]
            holder.send_signal(signal.SIGKILL)
            holder.wait()
            deadline = time.monotonic() + 5
            while node.trainer_pids() != [0] and time.monotonic() < deadline:
                time.sleep(0.02)
            assert node.trainer_pids() == [0]
            loader = ringloader.DataLoader(attach=name, trainer=0)
            assert next(iter(loader))[0].shape == (2, 3, 24, 24)
        finally:
            holder.kill()
            holder.wait()
            if child is not None:
                os.kill(int(child), signal.SIGKILL)  # the orphan it forked


IN_PLACE_TRAINER = """
    import json, os, torch, ringloader

    def memfd_bytes(batch):
        # What the node's memfd holds under the batch: the trainer's mapping
        # of it (private), and the file read through its own descriptor.
        at = batch.data_ptr()
        for line in open("/proc/self/maps"):
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= at < high:
                assert fields[1] == "rw-p", line
                offset, inode = int(fields[2], 16) + at - low, int(fields[4])
                break
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                if os.fstat(fd).st_ino == inode and "memfd:" in os.readlink(f"/proc/self/fd/{{fd}}"):
                    return os.pread(fd, batch.numel() * batch.element_size(), offset)
            except OSError:
                pass
        raise AssertionError("no descriptor of the ring")

    loader = ringloader.DataLoader(attach="{name}")
    out, changed = [], 0
    for epoch in range({epochs}):
        loader.set_epoch(epoch)
        for images, labels in loader:
            out.append([epoch, float(images.double().sum()), labels.tolist()])
            before = images.clone()
            images.sub_(0.5).mul_(2)  # what training scripts do
            assert not torch.equal(images, before)
            changed += memfd_bytes(images) != before.numpy().tobytes()
    print(json.dumps({{"device": loader.device, "changed": changed, "batches": out}}))
"""


def test_in_place_ops_on_host_batches_stay_private(image_folder):
    """Trainer 0 changes every batch in place (it used to die of SIGSEGV on
    the read-only ring): the node's memfd keeps its bytes, trainer 1 gets
    every batch byte for byte, and so does trainer 0 itself, two epochs
    through one decode-ahead ring slot and two lane slots (a private page
    kept past its batch's release would show a later batch old bytes)."""
    name = _name("in-place")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True,
                               num_workers=2, trainers=2, name=name, seed=7,
                               epochs=2, lane_slots=2, ring_slots=1) as node:
        node.start()
        procs = [_python(IN_PLACE_TRAINER.format(name=name, epochs=2), LOCAL_RANK=0),
                 _python(TRAINER.format(name=name, epochs=2, consume="pass"), LOCAL_RANK=1)]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, (proc.returncode, err)
            results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["changed"] == 0
    expected = _reference(image_folder, lambda e: _node_order(24, 2, 4, e), 2, 4)
    _check_split(results, expected, 2)
