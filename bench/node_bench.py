#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One loader per trainer against one node loader for all (issue 17, part 2).

  /usr/bin/python3 bench/node_bench.py --photos DIR [--trainers 2]
      [--workers-per-trainer 1] [--epochs 2] [--device cpu|cuda] [--step-ms 0]

Both sides run the same job through the public Python API: `trainers`
trainer processes each read their share of a JPEG ImageFolder
(RandomResizedCrop(224) + flip + ToTensor + Normalize, batch 32, shuffled)
for `epochs` epochs, each step sleeping `step-ms` (a stand-in model).

  own:   each trainer has its own ringloader.DataLoader(rank=r,
         world_size=T, num_workers=W): T rings, T worker pools, T indexes;
  node:  one ringloader.NodeLoader(num_workers=T*W, trainers=T) process and
         T trainers reading DataLoader(attach=...): one ring, one pool.

Reported per side: images/s (all trainers' samples / wall, start-up
included; and steady, from each trainer's first batch on), CPU seconds per
1000 images (getrusage of every finished process: trainers, node, workers),
peak host memory (sum of PSS over the job's processes, sampled every 50 ms),
and the trainers' mean wait for a batch per step. Rounds interleave the two
sides. Prints a table (stderr) and JSON (stdout).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

PIPELINE = """
import torchvision.transforms as T
transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
"""

TRAINER = PIPELINE + """
import json, sys, time, torch, ringloader
mode, rank, trainers, workers, epochs, step, device, name, photos = sys.argv[1:10]
rank, trainers, workers, epochs = int(rank), int(trainers), int(workers), int(epochs)
step = float(step) / 1000
if mode == "own":
    data = ringloader.datasets.ImageFolder(photos, transform)
    loader = ringloader.DataLoader(data, batch_size=32, shuffle=True, num_workers=workers,
                                   rank=rank, world_size=trainers, device=device, seed=1)
else:
    loader = ringloader.DataLoader(attach=name, trainer=rank, connect_timeout=120)
images, waited, steps = 0, 0.0, 0
started = time.perf_counter()
first = None
for epoch in range(epochs):
    loader.set_epoch(epoch)
    batches = iter(loader)
    while True:
        asked = time.perf_counter()
        batch = next(batches, None)
        waited += time.perf_counter() - asked
        if batch is None:
            break
        if first is None:  # steady state starts after the first batch
            first, images_at_first = time.perf_counter(), batch[0].shape[0]
        images += batch[0].shape[0]
        steps += 1
        if step:
            time.sleep(step)
if device != "cpu":
    torch.cuda.synchronize()
ended = time.perf_counter()
print(json.dumps({"images": images, "wait_s": waited, "steps": steps,
                  "seconds": ended - started, "steady_images": images - images_at_first,
                  "steady_s": ended - first}))
"""

NODE = PIPELINE + """
import sys, ringloader
name, trainers, workers, epochs, device, photos = sys.argv[1:7]
data = ringloader.datasets.ImageFolder(photos, transform)
node = ringloader.NodeLoader(data, batch_size=32, shuffle=True,
                             num_workers=int(workers) * int(trainers),
                             trainers=int(trainers), name=name, device=device,
                             epochs=int(epochs), seed=1)
node.serve()
"""


def descendants(root):
    """root and every process below it (from /proc's parent links)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def pss_bytes(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemorySampler(threading.Thread):
    """Peak of the summed PSS of this process's descendants."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.done = 0, False

    def run(self):
        me = os.getpid()
        while not self.done:
            total = sum(pss_bytes(pid) for pid in descendants(me) if pid != me)
            self.peak = max(self.peak, total)
            time.sleep(0.05)


def run_side(mode, args, round_index):
    name = f"node-bench-{os.getpid()}-{round_index}"
    python = sys.executable
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = MemorySampler()
    sampler.start()
    started = time.perf_counter()
    node = None
    if mode == "node":
        # Started with the trainers, as a launcher would: trainers that come
        # first wait for the node's name (connect_timeout).
        node = subprocess.Popen([python, "-c", NODE, name, str(args.trainers),
                                 str(args.workers_per_trainer), str(args.epochs),
                                 args.device, args.photos], stdout=subprocess.DEVNULL)
    trainers = [subprocess.Popen([python, "-c", TRAINER, mode, str(rank), str(args.trainers),
                                  str(args.workers_per_trainer), str(args.epochs),
                                  str(args.step_ms), args.device, name, args.photos],
                                 stdout=subprocess.PIPE, text=True)
                for rank in range(args.trainers)]
    reports = [json.loads(t.communicate()[0].strip().splitlines()[-1]) for t in trainers]
    wall = time.perf_counter() - started
    if node is not None:
        node.wait(timeout=60)  # its epochs are served
    sampler.done = True
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    images = sum(r["images"] for r in reports)
    steps = sum(r["steps"] for r in reports)
    # Trainers run in lockstep: the slowest one's steady span bounds the job.
    steady = sum(r["steady_images"] for r in reports) / max(r["steady_s"] for r in reports)
    return {"mode": mode, "images": images, "wall_s": wall, "images_per_s": images / wall,
            "steady_images_per_s": steady,
            "cpu_s_per_1000": 1000 * cpu / images, "peak_pss_mib": sampler.peak / 2**20,
            "wait_ms_per_step": 1000 * sum(r["wait_s"] for r in reports) / steps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", required=True)
    parser.add_argument("--trainers", type=int, default=2)
    parser.add_argument("--workers-per-trainer", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--step-ms", type=float, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = {"own": [], "node": []}
    for round_index in range(args.rounds):
        for mode in ("own", "node"):
            results[mode].append(run_side(mode, args, round_index))
    summary = {}
    for mode, runs in results.items():
        summary[mode] = {key: statistics.median(r[key] for r in runs)
                         for key in runs[0] if key != "mode"}
    print(f"{args.trainers} trainers x {args.workers_per_trainer} workers, {args.epochs} "
          f"epochs, step {args.step_ms} ms, device {args.device}; medians of {args.rounds}",
          file=sys.stderr)
    print(f"{'side':6} {'img/s wall':>10} {'img/s steady':>12} {'CPU s/1k img':>13} "
          f"{'peak PSS MiB':>13} {'wait ms/step':>13}", file=sys.stderr)
    for mode, row in summary.items():
        print(f"{mode:6} {row['images_per_s']:10.0f} {row['steady_images_per_s']:12.0f} "
              f"{row['cpu_s_per_1000']:13.2f} {row['peak_pss_mib']:13.0f} "
              f"{row['wait_ms_per_step']:13.1f}", file=sys.stderr)
    ratio = summary["node"]["images_per_s"] / summary["own"]["images_per_s"]
    steady_ratio = (summary["node"]["steady_images_per_s"] /
                    summary["own"]["steady_images_per_s"])
    print(f"node / own img/s: {ratio:.2f}x wall (start-up included), "
          f"{steady_ratio:.2f}x steady", file=sys.stderr)
    print(json.dumps({"args": vars(args), "runs": results, "medians": summary,
                      "node_over_own_images_per_s": ratio,
                      "node_over_own_steady_images_per_s": steady_ratio}))


if __name__ == "__main__":
    main()
