# SPDX-License-Identifier: BSD-3-Clause
"""The node loader across processes (issue 17, part 2): trainer processes
attach by name and split each epoch byte for byte as a plain DataLoader over
the node's order makes it; a killed trainer gives its lane back; a killed
node makes the trainer's next batch raise NodeError at once. With a GPU the
same runs on CUDA IPC lanes, with slow consumers and two slots a lane."""
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

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _name(what):
    return f"pytest-{what}-{os.getpid()}"


def _dataset(folder):
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    return ringloader.datasets.ImageFolder(folder, transform)


def _python(code, **env):
    """A Python process with this test's ringloader on its path."""
    environment = dict(os.environ, PYTHONUNBUFFERED="1",
                       **{k: str(v) for k, v in env.items()})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


TRAINER = """
    import json, sys, torch, ringloader
    loader = ringloader.DataLoader(attach="{name}")
    out = []
    for epoch in range({epochs}):
        loader.set_epoch(epoch)
        for images, labels in loader:
            {consume}
            out.append([epoch, float(images.double().sum()), labels.tolist()])
    print(json.dumps({{"device": loader.device, "batches": out}}))
"""


def _reference(folder, order_of, epochs, batch_size):
    """Per epoch, the batches a plain DataLoader makes over the node's order."""
    expected = []
    for epoch in range(epochs):
        order = order_of(epoch)
        loader = ringloader.DataLoader(_dataset(folder), batch_size=batch_size,
                                       sampler=order, seed=7)
        loader.set_epoch(epoch)
        expected.append([(float(x.double().sum()), y.tolist()) for x, y in loader])
    return expected


def _node_order(size, trainers, batch_size, epoch, seed=7):
    options = {"shuffle": True, "seed": seed, "batch_size": batch_size, "rank": 0,
               "world_size": 1}
    order = ringloader._ringloader.epoch_order(size, options, epoch)
    round_ = trainers * batch_size
    wanted = (size + round_ - 1) // round_ * round_
    return [order[i % size] for i in range(wanted)]


def _run_trainers(name, trainers, epochs, consume="pass"):
    procs = [_python(TRAINER.format(name=name, epochs=epochs, consume=consume),
                     LOCAL_RANK=rank) for rank in range(trainers)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _check_split(results, expected, trainers):
    for epoch, batches in enumerate(expected):
        for rank, result in enumerate(results):
            got = [(s, labels) for e, s, labels in result["batches"] if e == epoch]
            mine = batches[rank::trainers]
            assert len(got) == len(mine), (epoch, rank)
            for (s, labels), (want_sum, want_labels) in zip(got, mine):
                assert labels == want_labels
                assert s == pytest.approx(want_sum, rel=1e-6, abs=1e-3)


@pytest.mark.parametrize("trainers", [1, 2])
def test_trainer_processes_split_each_epoch_byte_for_byte(image_folder, trainers):
    name = _name(f"split{trainers}")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True,
                               num_workers=2, trainers=trainers, name=name, seed=7,
                               epochs=2, lane_slots=2) as node:
        node.start()
        results = _run_trainers(name, trainers, epochs=2)
        stats = node.stats()
    assert stats["attaches"] == trainers
    assert all(r["device"] == "cpu" for r in results)
    expected = _reference(image_folder, lambda e: _node_order(24, trainers, 4, e), 2, 4)
    _check_split(results, expected, trainers)


def test_a_killed_trainer_gives_its_lane_back(image_folder):
    name = _name("killed-trainer")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=3) as node:
        node.start()
        holder = _python(f"""
            import sys, time, ringloader
            loader = ringloader.DataLoader(attach="{name}")
            batches = iter(loader)
            kept = [next(batches), next(batches)]   # two slots held
            print("holding", flush=True)
            time.sleep(60)
        """)
        assert holder.stdout.readline().strip() == "holding"
        assert node.trainer_pids() == [holder.pid]
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        deadline = time.monotonic() + 10
        while node.trainer_pids() != [0] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert node.trainer_pids() == [0]
        assert node.stats()["reclaimed_slots"] == 2
        # The next trainer goes on with the lane's next batch.
        loader = ringloader.DataLoader(attach=name, trainer=0)
        first = next(iter(loader))
        assert first[0].shape == (2, 3, 24, 24)
        assert len(loader) == 12


def test_a_killed_node_fails_the_trainer_at_once(image_folder):
    name = _name("killed-node")
    node = _python(f"""
        import torchvision.transforms as T, ringloader
        data = ringloader.datasets.ImageFolder({image_folder!r}, T.Compose([T.CenterCrop(16), T.ToTensor()]))
        node = ringloader.NodeLoader(data, batch_size=2, num_workers=1, trainers=2, name="{name}")
        print("serving", flush=True)
        node.serve()
    """)
    try:
        assert node.stdout.readline().strip() == "serving"
        loader = ringloader.DataLoader(attach=name, trainer=0, connect_timeout=30)
        batches = iter(loader)
        next(batches)
        node.send_signal(signal.SIGKILL)
        node.wait()
        started = time.monotonic()
        with pytest.raises(ringloader.NodeError, match="died") as raised:
            for _ in batches:  # lane 1 has no trainer: lane 0 runs dry
                pass
        assert isinstance(raised.value, ConnectionError)
        assert time.monotonic() - started < 5
    finally:
        node.kill()
        node.wait()


def test_no_node_and_wrong_batch_size_are_clear(image_folder):
    with pytest.raises(ringloader.NodeError, match="no node loader"):
        ringloader.DataLoader(attach=_name("absent"), connect_timeout=0.2)
    name = _name("batch")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, name=name):
        with pytest.raises(ringloader.OptionError, match="batch_size=8"):
            ringloader.DataLoader(attach=name, batch_size=8)
        loader = ringloader.DataLoader(attach=name, batch_size=4)
        assert isinstance(loader, ringloader.DataLoader)
        assert isinstance(loader, torch.utils.data.DataLoader)


def test_a_cuda_node_without_a_gpu_is_refused_clearly(image_folder):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ringloader.OptionError, match="GPU|CUDA"):
        ringloader.NodeLoader(_dataset(image_folder), name=_name("nogpu"), device="cuda")


def test_python_datasets_are_refused_by_the_node():
    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.zeros(2), i

    with pytest.raises(ringloader.OptionError, match="runs no Python workers"):
        ringloader.NodeLoader(Numbers(), name=_name("python"))


@gpu
@pytest.mark.parametrize("trainers", [1, 2])
def test_cuda_ipc_lanes_match_host_lanes_under_slow_consumers(image_folder, trainers):
    """Two trainer processes on one GPU, each batch behind a long kernel:
    a slot overwritten before its consumer ran would change the sums."""
    name = _name(f"ipc{trainers}")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True,
                               num_workers=2, trainers=trainers, name=name, seed=7,
                               epochs=3, lane_slots=2, device="cuda",
                               devices=[0] * trainers) as node:
        node.start()
        results = _run_trainers(
            name, trainers, epochs=3,
            consume="torch.cuda._sleep(20_000_000); images = images * 1.0")
    assert all(r["device"] == "cuda:0" for r in results)
    expected = _reference(image_folder, lambda e: _node_order(24, trainers, 4, e), 3, 4)
    _check_split(results, expected, trainers)


# --- trust (issue 24): who attaches, what a trainer can touch -------------

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
NOBODY = 65534


def _python_as(user, code, **env):
    # An absolute path to this ringloader: the child starts in "/".
    package = os.path.dirname(os.path.dirname(os.path.abspath(ringloader.__file__)))
    environment = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=package,
                       **{k: str(v) for k, v in env.items()})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            user=user, group=user, extra_groups=[] if user else None, cwd="/")


# A raw trainer: the attach protocol by hand (node_socket.h), so a test can
# hold the node's descriptors itself.
RAW_ATTACH = textwrap.dedent("""
    import os, socket, struct, mmap, random, sys, time
    def attach(name, lane):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0ringloader/" + name)
        s.sendall(struct.pack("<IIii", 0x4e4c5241, 3, lane, 0))
        msg, fds, _, _ = socket.recv_fds(s, 256, 3)
        accepted = struct.unpack_from("<i", msg, 4)[0]
        return s, accepted, fds, msg[16:].split(b"\\0")[0].decode()
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
    """))
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
            """))
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
