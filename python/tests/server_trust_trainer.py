# SPDX-License-Identifier: BSD-3-Clause
"""A trainer for test_loader_server_trust.py: a Python dataset, two
persistent workers. It runs one epoch, prints its loader server's address
and its stubs' pids, then waits for a line on stdin while the test attacks
the server. A line "child MODE ..." makes it run the attack itself, as its
own child (same uid, a process the trainer started), "nobody-child MODE
..." as its own child running as `nobody`; "go" goes on. Then it runs
two more epochs, killing a worker mid-epoch in the first (so the server must
serve a respawned stub), and checks every byte against the first epoch.
Ends with EPOCH-OK."""
import os
import signal
import subprocess
import sys
import time

import torch

import ringloader

HERE = os.path.dirname(os.path.abspath(__file__))


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.002)  # long enough for a kill to land mid-batch
        return torch.full((4,), float(i)) * torch.arange(1.0, 5.0), i


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def server_names():
    """This trainer's loader servers' names in /proc/net/unix (any user
    reads them there): `@ringloader-<pid>-<hex>`, <pid> a child of the
    zygote, itself this process's child."""
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    names = {row[7] for row in rows if len(row) > 7 and row[7].startswith("@ringloader-")}
    return {name for name in names
            if parent_of(parent_of(int(name.split("-")[1]))) == os.getpid()}


def workers_served(loader, timeout=10):
    """Whether each stub's process group holds a worker the server forked
    for it (a worker joins its stub's group)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = set()
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(name) != int(fields[2]):
                    groups.add(int(fields[2]))  # field 5: the process group
            except (OSError, ValueError):
                pass
        if all(stub in groups for stub in loader._native.worker_pids()):
            return True
        time.sleep(0.1)
    return False


def epoch(loader, kill_at=None):
    got = []
    for b, (x, y) in enumerate(loader):
        if b == kill_at:
            os.kill(loader._native.worker_pids()[0], signal.SIGKILL)
        got.append((x.clone(), y.clone()))
    return got


def same(a, b):
    return len(a) == len(b) == 10 and all(
        torch.equal(x, rx) and torch.equal(y, ry) for (x, y), (rx, ry) in zip(a, b))


def main():
    before = server_names()
    loader = ringloader.DataLoader(Numbers(), batch_size=4, num_workers=2, seed=5,
                                   persistent_workers=True, ring_slots=3)
    reference = epoch(loader)
    new = sorted(server_names() - before)
    assert len(new) == 1, new
    print("ADDRESS", new[0], flush=True)
    print("STUBS", *loader._native.worker_pids(), flush=True)
    children = []  # attacks run by this trainer, held until it ends
    for line in sys.stdin:
        words = line.split()
        if words[0] == "go":
            break
        if words[0] in ("child", "nobody-child"):  # from a process this trainer started
            as_nobody = {"user": 65534, "group": 65534, "extra_groups": [], "cwd": "/"}
            with open(os.path.join(HERE, "server_trust_attack.py")) as attack:
                code = attack.read()  # nobody need not read this tree
            child = subprocess.Popen(
                [os.environ.get("RINGLOADER_TEST_NOBODY_PYTHON", sys.executable),
                 "-S", "-c", code, new[0], *words[1:]],
                stdout=subprocess.PIPE, text=True,
                **(as_nobody if words[0] == "nobody-child" else {}))
            children.append(child)
            print("CHILD", child.stdout.readline().strip() or "(nothing)", flush=True)
    restarts = loader.stats()["worker_restarts"]
    assert same(epoch(loader, kill_at=1), reference), "respawned epoch differs"
    assert loader.stats()["worker_restarts"] > restarts, "no worker was respawned"
    assert same(epoch(loader), reference), "last epoch differs"
    assert workers_served(loader), "a stub was not served"
    print("EPOCH-OK", flush=True)
    for child in children:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
