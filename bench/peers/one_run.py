# SPDX-License-Identifier: BSD-3-Clause
"""One round of one peer, in a fresh interpreter: prints one JSON line.

    python bench/peers/one_run.py PEER --folder DIR --shards PATTERN ... [--epochs 2]

Figures:
- first_batch_s: from just before the dataset and loader are made (imports
  done) to the first batch in hand: indexing, worker start, first decode;
- img_per_s: images / wall time of `--epochs` timed epochs, after one
  warm-up epoch (the one the first batch opened);
- cpu_s_per_1000: CPU time (user + system) of the whole process tree during
  the timed epochs, per 1,000 images;
- peak_pss_mib: the largest sum of Pss over the process tree, sampled from
  /proc/PID/smaps_rollup every 0.1 s over the whole run by a child
  process (not a thread in the trainer: see Sampler);
- peak_private_mib: the same for Pss_Anon + Pss_Shmem (no file-backed
  pages), the steadier figure under others' load.
The consumer touches each batch (reads one element) and nothing else.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_pids(root, skip=None):
    """root and its descendants, without skip and its own descendants."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid == skip:
            continue
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def tree_cpu_s(pids):
    """utime + stime of live processes, plus what they reaped (cutime, cstime)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def tree_pss_kib(pids):
    """(Pss, Pss_Anon + Pss_Shmem) of the tree, KiB. The second leaves out
    file-backed pages (shared libraries), whose Pss is divided among every
    process on the machine mapping them and so moves with others' load."""
    total = private = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                    elif line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                        private += int(line.split()[1])
        except OSError:
            pass
    return total, private


class Sampler:
    """Peak PSS of the trainer's tree, sampled every 0.1 s by a small child
    process (this file, --sample PID), not by a thread here: a thread in the
    trainer would change what is measured (ringloader forks its Python-worker
    zygote only while no other thread could hold a lock, else spawns a
    second interpreter; a GIL-bound peer would share its GIL). The sampler
    leaves itself out of the tree it sums, and cpu_now() leaves it out too."""

    def __init__(self):
        import subprocess
        self.process = subprocess.Popen(
            [sys.executable, "-S", os.path.abspath(__file__), "--sample", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def finish(self):
        """Stops the sampler; returns the peaks (Pss, anon + shmem), KiB."""
        out, _ = self.process.communicate("stop\n", timeout=30)
        return [int(x) for x in out.split()[-2:]]


def sample(root):
    """The sampler process: sums the tree's Pss until a line (or EOF) on stdin."""
    import select
    me, peak, peak_private = os.getpid(), 0, 0
    while not select.select([sys.stdin], [], [], 0.1)[0]:
        total, private = tree_pss_kib(tree_pids(root, skip=me))
        peak, peak_private = max(peak, total), max(peak_private, private)
    print(peak, peak_private, flush=True)


def cpu_now(skip=None):
    # The tree's live processes; processes that exited were reaped by someone
    # in the tree and are counted in its reaper's cutime/cstime.
    return tree_cpu_s(tree_pids(os.getpid(), skip))


def main():
    if sys.argv[1:2] == ["--sample"]:
        return sample(int(sys.argv[2]))
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=sorted(peers.PEERS))
    parser.add_argument("--folder")
    parser.add_argument("--shards")
    parser.add_argument("--small-shards")
    parser.add_argument("--litdata-dir")
    parser.add_argument("--mosaic-dir")
    parser.add_argument("--ffcv-exact")
    parser.add_argument("--ffcv-recipe")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    opts = parser.parse_args()
    if opts.shards:
        import glob
        opts.shard_list = sorted(glob.glob(os.path.join(os.path.dirname(opts.shards),
                                                        "*.tar")))
    import torch
    torch.set_num_threads(1)
    sampler = Sampler()
    skip = sampler.process.pid
    start = time.perf_counter()
    epoch = peers.PEERS[opts.peer](opts)
    first = None
    count = 0
    for images, _labels in epoch():
        if first is None:
            first = time.perf_counter() - start
        float(images[0, 0, 0, 0])
        count += len(images)
    warm_images = count
    cpu0, t0, count = cpu_now(skip), time.perf_counter(), 0
    for _ in range(opts.epochs):
        for images, _labels in epoch():
            float(images[0, 0, 0, 0])
            count += len(images)
    wall, cpu = time.perf_counter() - t0, cpu_now(skip) - cpu0
    peak_kib, peak_private_kib = sampler.finish()
    shape = list(images.shape)
    print(json.dumps({
        "peer": opts.peer, "first_batch_s": first, "img_per_s": count / wall,
        "cpu_s_per_1000": cpu / count * 1000, "peak_pss_mib": peak_kib / 1024,
        "peak_private_mib": peak_private_kib / 1024,
        "images_per_epoch": warm_images, "timed_images": count, "batch_shape": shape,
        "dtype": str(images.dtype), "loadavg": open("/proc/loadavg").read().split()[:3],
    }), flush=True)
    os._exit(0)  # some peers' worker threads hold the exit otherwise


if __name__ == "__main__":
    main()
