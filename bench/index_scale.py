#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The index at ImageNet scale (issue 29): torch 1.13's DataLoader over
torchvision's ImageFolder against ringloader's DataLoader over
ringloader.datasets.ImageFolder, side by side in one run.

Builds its own data: --files symlinks (default 1,281,000; --files 200000
for a quick run) to one small JPEG in --classes folders (1,000), kept under
--data for later runs. Each side runs in a fresh interpreter; this process
samples /proc/<pid>/smaps_rollup of that process tree every --interval
seconds and keeps each process's peak PSS and the tree's.

Workload: Resize((16, 16)) + ToTensor, batch 256, 2 workers, one epoch.
Measured: building the dataset (the index), time to the first batch, the
epoch, peak PSS (trainer, each worker, other processes, whole tree).

    nice -n 19 python3 bench/index_scale.py --files 200000
    nice -n 19 python3 bench/index_scale.py            # 1.28M
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make_data(root, files, classes):
    """root/n%08d/n%08d_%06d.JPEG -> ../one.jpg; a marker says it is whole."""
    marker = os.path.join(root, f".complete-{files}-{classes}")
    data = os.path.join(root, "train")
    if os.path.exists(marker):
        return data
    if os.path.exists(root):
        subprocess.run(["rm", "-rf", root], check=True)
    os.makedirs(data)
    from PIL import Image
    import numpy as np
    pixels = (np.arange(32 * 32 * 3) % 251).astype(np.uint8).reshape(32, 32, 3)
    Image.fromarray(pixels).save(os.path.join(root, "one.jpg"), quality=90)
    start = time.monotonic()
    per_class = [files // classes + (1 if c < files % classes else 0) for c in range(classes)]

    def make_class(c):
        # Relative targets (short links, a movable tree) made through the
        # folder's descriptor; os.symlink drops the GIL, so threads overlap.
        name = f"n{c:08d}"
        folder = os.path.join(data, name)
        os.mkdir(folder)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for j in range(per_class[c]):
                os.symlink("../../one.jpg", f"{name}_{j:06d}.JPEG", dir_fd=fd)
        finally:
            os.close(fd)

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make_class, range(classes)))
    open(marker, "w").close()
    print(f"made {files:,} symlinks in {classes} folders in {time.monotonic() - start:.1f} s",
          flush=True)
    return data


# ---- one side, in its own interpreter ----

def run_side(side, root, batch_size, workers):
    import torch
    import torchvision.transforms as T
    transform = T.Compose([T.Resize((16, 16)), T.ToTensor()])
    result = {}
    start = time.monotonic()
    if side == "torch":
        import torchvision
        dataset = torchvision.datasets.ImageFolder(root, transform)
        loader_class = torch.utils.data.DataLoader
    else:
        import ringloader
        dataset = ringloader.datasets.ImageFolder(root, transform)
        loader_class = ringloader.DataLoader
        result["table_mib"] = dataset._handle.table_bytes / 2**20
    result["index_s"] = time.monotonic() - start
    result["samples"] = len(dataset)
    print(json.dumps({"phase": "indexed"}), flush=True)
    loader = loader_class(dataset, batch_size=batch_size, shuffle=True, num_workers=workers)
    start = time.monotonic()
    batches = 0
    for images, labels in loader:
        if batches == 0:
            result["first_batch_s"] = time.monotonic() - start
        batches += 1
    result["epoch_s"] = time.monotonic() - start
    result["batches"] = batches
    print(json.dumps({"phase": "done", **result}), flush=True)


# ---- the sampler ----

def children_of():
    """pid -> parent pid for every process."""
    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return parents


def tree(root_pid):
    parents = children_of()
    members, frontier = {root_pid}, [root_pid]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return members


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def role(pid, trainer, side):
    if pid == trainer:
        return "trainer"
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if exe == "ringloader-worker":
        return "worker"
    if exe == "ringloader-python-stub":
        return "other"
    if "index_scale.py" in cmdline and "--side" in cmdline:
        # A fork of the trainer: torch's workers; ringloader's zygote (made
        # at import for Python datasets; its workers are ringloader-worker).
        return "worker" if side == "torch" else "other:zygote"
    return f"other:{exe}"


class Sampler(threading.Thread):
    def __init__(self, pid, interval, side):
        super().__init__(daemon=True)
        self.pid, self.interval, self.side = pid, interval, side
        self.stop = threading.Event()
        self.peak_tree = 0
        self.peak = {}  # pid -> (role, peak KiB)

    def run(self):
        while not self.stop.is_set():
            total = 0
            for pid in tree(self.pid):
                kib = pss_kib(pid)
                if kib is None:
                    continue
                total += kib
                name, best = self.peak.get(pid, (role(pid, self.pid, self.side), 0))
                self.peak[pid] = (name, max(best, kib))
            self.peak_tree = max(self.peak_tree, total)
            self.stop.wait(self.interval)

    def summary(self):
        by_role = {}
        for name, kib in self.peak.values():
            by_role.setdefault(name, []).append(kib / 1024)
        return {"tree_mib": self.peak_tree / 1024,
                "trainer_mib": max(by_role.get("trainer", [0])),
                "workers_mib": sorted(by_role.get("worker", []), reverse=True),
                "other_mib": {k: max(v) for k, v in by_role.items()
                              if k not in ("trainer", "worker")}}


def measure(side, data, args):
    command = [sys.executable, os.path.abspath(__file__), "--side", side, "--data-folder", data,
               "--batch-size", str(args.batch_size), "--workers", str(args.workers)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    sampler = Sampler(child.pid, args.interval, side)
    sampler.start()
    result = {}
    for line in child.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("phase") == "done":
            result = message
    child.wait()
    sampler.stop.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"{side} side failed with status {child.returncode}")
    result.update(sampler.summary())
    return result


def ratio(a, b):
    return f"{a / b:.2f}x" if b else "-"


def table(torch_side, ours):
    rows = [("building the dataset (index)", "index_s", "s"),
            ("first batch", "first_batch_s", "s"),
            ("one epoch", "epoch_s", "s"),
            ("peak PSS, whole tree", "tree_mib", "MiB"),
            ("trainer", "trainer_mib", "MiB")]
    lines = ["| | torch 1.13 + torchvision ImageFolder | ringloader | ringloader / torch |",
             "|---|---|---|---|"]
    for label, key, unit in rows:
        a, b = torch_side[key], ours[key]
        lines.append(f"| {label} | {a:,.1f} {unit} | {b:,.1f} {unit} | {ratio(b, a)} |")
    tw, ow = torch_side["workers_mib"], ours["workers_mib"]
    lines.append("| each worker | " + " / ".join(f"{w:,.0f}" for w in tw) + " MiB | " +
                 " / ".join(f"{w:,.0f}" for w in ow) + f" MiB | {ratio(max(ow or [0]), max(tw or [0]))} |")
    others = ", ".join(f"{k} {v:,.0f} MiB" for k, v in ours["other_mib"].items()) or "-"
    lines.append(f"| other processes | {', '.join(f'{k} {v:,.0f} MiB' for k, v in torch_side['other_mib'].items()) or '-'} | {others} | |")
    if "table_mib" in ours:
        lines.append(f"| sample table (memfd, shared) | - | {ours['table_mib']:,.1f} MiB | |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_281_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--data", default="/tmp/ringloader-index-scale")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--sides", default="torch,ringloader")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--data-folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return run_side(args.side, args.data_folder, args.batch_size, args.workers)
    data = make_data(f"{args.data}-{args.files}", args.files, args.classes)
    results = {}
    for side in args.sides.split(","):
        results[side] = measure(side, data, args)
        print(side, json.dumps(results[side]), flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"\n{args.files:,} files, {args.classes} classes, batch {args.batch_size}, "
          f"{args.workers} workers, load average {' '.join(load)}\n")
    if "torch" in results and "ringloader" in results:
        print(table(results["torch"], results["ringloader"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
