#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Soak test: random faults over random loaders for N minutes.

Each round builds a loader (tar shards, an image folder or a Python dataset;
2 or 4 workers), runs a few epochs and injects one random fault per epoch:
SIGKILL of a worker, SIGSTOP then SIGCONT, SIGSTOP left for the hang timeout,
a trainer os.fork() whose child exits (fast, or after collecting its copy of
the loader), an early loop exit, or Ctrl-C while the trainer waits. Every
batch is hashed and compared with an undisturbed reference epoch; the
trainer's fd count and RSS are sampled between rounds.

    PYTHONPATH=build/python /usr/bin/python3 scripts/soak.py --minutes 10 --seed 0
Exit status 1 when a batch was lost or differed, an epoch raised (a time-out
included), or fds grew. The same seed replays the same rounds and faults
(timing still varies). CI runs a short one (scripts/test.sh).
"""
import argparse
import collections
import gc
import hashlib
import io
import os
import random
import signal
import sys
import tarfile
import tempfile
import threading
import time
import traceback

import numpy as np
import torch

import ringloader
from ringloader import transforms as T

FAULTS = ["none", "kill", "stop_cont", "stop_hang", "fork_exit", "fork_collect",
          "break", "ctrl_c"]


class Numbers(torch.utils.data.Dataset):
    """A Python dataset whose bytes depend only on the index."""

    def __len__(self):
        return 48

    def __getitem__(self, i):
        time.sleep(0.003)
        g = torch.Generator().manual_seed(i)
        return torch.rand((3, 8, 8), generator=g), i


def make_data(root, rng):
    from PIL import Image
    folder = os.path.join(root, "images")
    for c in range(3):
        os.makedirs(os.path.join(folder, f"class_{c}"), exist_ok=True)
        for j in range(16):
            h, w = rng.integers(20, 48, size=2)
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, f"class_{c}", f"{j:03d}.jpg"),
                                         quality=85)
    dataset = ringloader.datasets.ImageFolder(folder)
    shards = os.path.join(root, "shards")
    os.makedirs(shards)
    per_shard, count = 8, 0
    for start in range(0, len(dataset), per_shard):
        with tarfile.open(os.path.join(shards, f"shard-{count:03d}.tar"), "w") as tar:
            for n in range(start, min(start + per_shard, len(dataset))):
                image, label = dataset.samples[n]
                tar.add(image, arcname=f"{n:06d}.jpg")
                info = tarfile.TarInfo(f"{n:06d}.cls")
                text = str(label).encode()
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
        count += 1
    return folder, os.path.join(shards, "shard-{%03d..%03d}.tar" % (0, count - 1))


def make_dataset(kind, folder, pattern):
    pipeline = T.Compose([T.CenterCrop(16), T.ToTensor()])
    if kind == "folder":
        return ringloader.datasets.ImageFolder(folder, pipeline)
    if kind == "tar":
        return ringloader.datasets.TarShards(pattern, pipeline)
    return Numbers()


def digest(batch):
    x, y = batch
    h = hashlib.sha1(x.contiguous().numpy().tobytes())
    h.update(y.contiguous().numpy().tobytes())
    return h.hexdigest()


def resume(pid):
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass  # killed meanwhile (hang timeout)


def fds():
    return len(os.listdir("/proc/self/fd"))


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.faults = collections.Counter()
        self.epochs = collections.Counter()  # checked in full / prefix
        self.lost = self.differing = self.extra = 0
        self.samples = 0
        self.latencies = []  # seconds from SIGINT to KeyboardInterrupt
        self.interrupts = 0  # SIGINTs sent during a wait
        self.in_next, self.epoch_over, self.interrupter = 0, threading.Event(), None
        # Held by the interrupter while it decides and sends, and by the main
        # thread when it leaves next(): no SIGINT is sent after that.
        self.in_next_lock = threading.Lock()
        self.slow = []  # interrupts that took over 200 ms, and where
        self.problems = []

    def run_epoch(self, loader, reference, fault):
        """Iterates one epoch with `fault`; returns the batch digests seen and
        whether the epoch ran to its end."""
        pids = loader.worker_pids()
        at = self.rng.randrange(len(reference))
        got, it, finished = [], iter(loader), True
        self.in_next, self.epoch_over = 0, threading.Event()
        stopped, sent = [], []
        try:
            b, injected = 0, False
            while True:
                if b == at and not injected:
                    injected = True
                    if fault == "break":
                        finished = False
                        break
                    self.inject(loader, fault, pids, stopped, sent)
                batch = None
                try:
                    self.in_next = time.monotonic()
                    batch = next(it)
                    with self.in_next_lock:  # a SIGINT sent before lands by here
                        self.in_next = 0
                except StopIteration:
                    break
                except KeyboardInterrupt:
                    with self.in_next_lock:
                        self.in_next = 0
                    self.interrupted(loader, sent, stopped)
                    if batch is None:
                        continue  # the same iterator goes on with the awaited batch
                    # It landed after next() returned: the batch is ours.
                got.append(digest(batch))
                del batch
                b += 1
        finally:
            self.in_next = 0
            self.epoch_over.set()
            if self.interrupter is not None:
                self.interrupter.join()
                self.interrupter = None
            for pid in stopped:
                resume(pid)
        return got, finished

    def interrupted(self, loader, sent, stopped):
        latency = time.monotonic() - sent[0]
        self.latencies.append(latency)
        if latency > 0.2:
            self.slow.append(f"{self.label}: {latency * 1000:.0f} ms, restarts "
                             f"{loader.stats()['worker_restarts']}")
        for pid in stopped:
            resume(pid)
        stopped.clear()

    def inject(self, loader, fault, pids, stopped, sent):
        live = loader.worker_pids() or pids
        victim = self.rng.choice(live)
        if fault == "kill":
            os.kill(victim, signal.SIGKILL)
        elif fault == "stop_cont":
            os.kill(victim, signal.SIGSTOP)
            stopped.append(victim)
            threading.Timer(0.3, resume, (victim,)).start()
        elif fault == "stop_hang":
            os.kill(victim, signal.SIGSTOP)  # hang_timeout kills and replaces it
        elif fault in ("fork_exit", "fork_collect"):
            pid = os.fork()
            if pid == 0:
                if fault == "fork_collect":
                    # The child collects its copy of the loader and batches:
                    # its backend (native loader, workers) and the hold of
                    # the epoch's iterator on them.
                    iterator = getattr(loader._backend, "_iterator", None)
                    if iterator is not None:
                        iterator._native = iterator._backend = None
                    loader._backend = None
                    gc.collect()
                os._exit(0)
            os.waitpid(pid, 0)
        elif fault == "ctrl_c":
            for pid in live:  # the trainer then surely waits
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            self.interrupter = threading.Thread(target=self.interrupt_the_wait,
                                                args=(sent, self.epoch_over, list(live)))
            self.interrupter.start()

    def interrupt_the_wait(self, sent, over, stopped):
        """Sends SIGINT once the trainer has been inside next() for 0.2 s
        (its workers stopped, it can only be waiting), so that the
        KeyboardInterrupt lands in the wait. A worker replaced or resumed
        meanwhile may deliver the batch at the same moment: the interrupt
        then lands as next() returns (the iterator keeps the batch for the
        next call) or just after (run_epoch keeps it); never later, since
        nothing is sent once the main thread has left next()."""
        main = threading.main_thread().ident
        while not over.is_set():
            with self.in_next_lock:
                entered = self.in_next
                due = entered and time.monotonic() - entered > 0.2
                if due:
                    sent.append(time.monotonic())
                    signal.pthread_kill(main, signal.SIGINT)
                    self.interrupts += 1
            if due:
                # No KeyboardInterrupt 2 s later: count it, let the epoch go on.
                if not over.wait(2) and self.in_next == entered:
                    self.problems.append(f"{self.label}: no KeyboardInterrupt 2 s "
                                         f"after SIGINT")
                    for pid in stopped:
                        resume(pid)
                return
            time.sleep(0.01)

    def check(self, reference, got, finished, label):
        expected = reference if finished else reference[:len(got)]
        if len(got) < len(expected):
            self.lost += len(expected) - len(got)
        if len(got) > len(expected):
            self.extra += len(got) - len(expected)
        bad = sum(a != b for a, b in zip(got, expected))
        self.differing += bad
        if bad or len(got) != len(expected):
            self.problems.append(f"{label}: {len(got)} batches vs {len(expected)}, "
                                 f"{bad} differ")
        self.epochs["full" if finished else "prefix"] += 1

    def round(self, kind, data, references):
        workers = 4 if self.rng.random() < self.args.four_worker_share else 2
        dataset = make_dataset(kind, *data)
        loader = ringloader.DataLoader(dataset, batch_size=4, num_workers=workers,
                                       hang_timeout=2.0, persistent_workers=True,
                                       timeout=20)  # a hang is reported, not waited out
        reference = references[kind]
        for _ in range(self.args.epochs_per_round):
            fault = self.rng.choice(FAULTS)
            self.faults[fault] += 1
            label = self.label = f"{kind}/{workers}w/{fault}"
            try:
                got, finished = self.run_epoch(loader, reference, fault)
            except Exception as error:  # a fault the loader must survive
                where = traceback.extract_tb(error.__traceback__)[-1]
                self.problems.append(f"{label}: {type(error).__name__}: {error} "
                                     f"(at {os.path.basename(where.filename)}:{where.lineno})")
                break
            self.samples += 4 * len(got)
            self.check(reference, got, finished, label)
        del loader
        gc.collect()

    def main(self):
        # A shell's background job starts with SIGINT ignored (and Python
        # then keeps it so): the Ctrl-C faults need Python's own handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with tempfile.TemporaryDirectory(prefix="ringloader-soak-") as root:
            data = make_data(root, np.random.default_rng(self.args.seed))
            references = {}
            for kind in ("folder", "tar", "python"):
                loader = ringloader.DataLoader(make_dataset(kind, *data), batch_size=4,
                                               num_workers=2)
                references[kind] = [digest(b) for b in loader]
                del loader
            gc.collect()
            end = time.monotonic() + self.args.minutes * 60
            rounds, samples = 0, []
            while time.monotonic() < end:
                self.round(self.rng.choice(list(references)), data, references)
                rounds += 1
                samples.append((fds(), rss_mb()))
                if rounds % 10 == 0:
                    print(f"[{time.strftime('%H:%M:%S')}] {rounds} rounds, "
                          f"{sum(self.epochs.values())} epochs, fds {samples[-1][0]}, "
                          f"rss {samples[-1][1]:.0f} MB, problems {len(self.problems)}",
                          flush=True)
        return self.summary(rounds, samples)

    def summary(self, rounds, samples):
        # Growth is taken after a warm-up round (imports, first allocations).
        base = samples[min(1, len(samples) - 1)]
        fd_growth = samples[-1][0] - base[0]
        rss_growth = samples[-1][1] - base[1]
        print("\n== ringloader soak summary ==")
        print(f"minutes {self.args.minutes}, seed {self.args.seed}, rounds {rounds}")
        print("faults injected: " + ", ".join(f"{k} {self.faults[k]}" for k in FAULTS))
        print(f"epochs checked: {sum(self.epochs.values())} "
              f"({self.epochs['full']} full, {self.epochs['prefix']} up to a break); "
              f"samples checked {self.samples}")
        print(f"batches lost {self.lost}, extra {self.extra}, differing {self.differing}")
        lat = sorted(self.latencies) or [0.0]
        print(f"Ctrl-C sent mid-wait {self.interrupts}, KeyboardInterrupts caught "
              f"{len(self.latencies)}; latency median {lat[len(lat) // 2] * 1000:.0f} ms, "
              f"max {lat[-1] * 1000:.0f} ms, over 200 ms: {sum(x > 0.2 for x in lat)}")
        print(f"fds: {base[0]} -> {samples[-1][0]} (growth {fd_growth}, "
              f"max {max(s[0] for s in samples)})")
        print(f"RSS: {base[1]:.0f} MB -> {samples[-1][1]:.0f} MB "
              f"(growth {rss_growth:+.0f} MB, max {max(s[1] for s in samples):.0f} MB)")
        for slow in self.slow[:10]:
            print("SLOW INTERRUPT", slow)
        for problem in self.problems[:30]:
            print("PROBLEM", problem)
        bad = self.lost or self.extra or self.differing or self.problems or fd_growth > 0
        return 1 if bad else 0


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs-per-round", type=int, default=3)
    parser.add_argument("--four-worker-share", type=float, default=0.25,
                        help="share of rounds with 4 workers (else 2)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(Soak(parse()).main())
