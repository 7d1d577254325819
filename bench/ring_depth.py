#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What the ring's depth costs and buys (issue 27's memory goal): the same
loader with ring_slots = 3 .. 2W + 2, side by side, rounds interleaved.

Each slot of a float32 ImageNet batch is ~37 MiB of shared memory that stays
resident, so a shallower ring is leaner; what it may cost is throughput,
because batch b always lives in slot b % K and the trainer takes batches in
order: a worker that finished early waits for a free slot behind a slower
batch (workers' "slot wait"). That cost shows with any consumer, and most
with one that runs at about the workers' pace (a GPU step), so each depth
runs under two consumers:

* touch: reads one value per batch (the loader alone);
* step: sleeps a fixed time per batch (a GPU step that needs no host CPU),
  --step-fraction of the touch consumer's batch period in the same round.

Each run is a fresh interpreter (`--one SLOTS STEP_S`). Measured over its
epochs after the first: img/s, the workers' slot wait as a share of their
time, the trainer's wait for a batch, and the tree's peak anon + shmem
memory over the whole run (smaps_rollup, sampled by a thread: this bench
compares ringloader with itself only).

    python bench/ring_depth.py --folder DIR [--workers 2] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from one_run import tree_pids  # noqa: E402  (imports peers.py: no peer itself)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def private_mib(pids):
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                        total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


class PeakSampler(threading.Thread):
    def __init__(self, interval=0.1):
        super().__init__(daemon=True)
        self.interval, self.peak, self.stop = interval, 0.0, threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.wait(self.interval):
            self.peak = max(self.peak, private_mib(tree_pids(me)))


def make_loader(opts, slots):
    import ringloader
    import ringloader.transforms as R
    transform = R.Compose([R.RandomResizedCrop(224), R.RandomHorizontalFlip(),
                           R.ToTensor(), R.Normalize(MEAN, STD)], mode=opts.mode)
    dataset = ringloader.datasets.ImageFolder(opts.folder, transform)
    return ringloader.DataLoader(dataset, batch_size=opts.batch_size, shuffle=True,
                                 num_workers=opts.workers, ring_slots=slots)


def one_run(opts, slots, step_s):
    """Runs `opts.epochs` epochs; figures over all but the first."""
    loader = make_loader(opts, slots)
    sampler = PeakSampler()
    sampler.start()
    for images, _ in loader:  # warm-up: workers start, caches fill
        float(images[0, 0, 0, 0])
    before, start, images_seen = loader.stats(), time.perf_counter(), 0
    for _ in range(opts.epochs - 1):
        for images, _ in loader:
            float(images[0, 0, 0, 0])
            images_seen += len(images)
            if step_s:
                time.sleep(step_s)
    wall = time.perf_counter() - start
    after = loader.stats()
    sampler.stop.set()
    sampler.join()
    worker_time = wall * opts.workers
    row = {
        "slots": after["ring_slots"], "step_ms": round(step_s * 1e3, 1),
        "img_s": images_seen / wall,
        "slot_wait_share": (after["slot_wait_s"] - before["slot_wait_s"]) / worker_time,
        "trainer_wait_share": (after["trainer_wait_s"] - before["trainer_wait_s"]) / wall,
        "peak_private_mib": sampler.peak,
        "load": os.getloadavg()[0],
    }
    return row


def run_fresh(opts, slots, step_s):
    command = [sys.executable, os.path.abspath(__file__), "--one", str(slots), str(step_s)]
    for flag in ("folder", "workers", "batch_size", "epochs", "mode"):
        command += ["--" + flag.replace("_", "-"), str(getattr(opts, flag))]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, help="an ImageFolder of photos")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=6, help="per run, the first untimed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="exact", choices=["exact", "fast"])
    parser.add_argument("--slots", default="", help="comma list (default 3..2W+2)")
    parser.add_argument("--step-fraction", type=float, default=0.9)
    parser.add_argument("--out", help="append raw runs here (JSON lines)")
    parser.add_argument("--one", nargs=2, metavar=("SLOTS", "STEP_S"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.one:
        import torch
        torch.set_num_threads(1)
        print(json.dumps(one_run(opts, int(opts.one[0]), float(opts.one[1]))), flush=True)
        os._exit(0)
    depths = ([int(s) for s in opts.slots.split(",")] if opts.slots
              else list(range(3, 2 * opts.workers + 3)))
    rows = {}
    for round_no in range(opts.rounds):
        # The touch consumer first: the step consumer's sleep is a share of
        # its batch period at the deepest ring in this round.
        touch = {d: run_fresh(opts, d, 0.0) for d in reversed(depths)}
        period = opts.batch_size / touch[max(depths)]["img_s"]
        for d in depths:
            step = run_fresh(opts, d, opts.step_fraction * period)
            for row in (touch[d], step):
                row["round"] = round_no
                rows.setdefault((row["slots"], row["step_ms"] > 0), []).append(row)
                print(json.dumps(row), flush=True)
                if opts.out:
                    with open(opts.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    print(f"\n| slots | consumer | img/s (median; rounds) | workers' slot wait | "
          f"trainer wait | peak anon + shmem MiB | load |")
    print("|---|---|---|---|---|---|---|")
    for (slots, stepped), runs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rates = [r["img_s"] for r in runs]
        print(f"| {slots} | {'step %.0f ms' % runs[0]['step_ms'] if stepped else 'touch'} | "
              f"{statistics.median(rates):.0f}; {', '.join('%.0f' % r for r in rates)} | "
              f"{statistics.median(r['slot_wait_share'] for r in runs):.1%} | "
              f"{statistics.median(r['trainer_wait_share'] for r in runs):.1%} | "
              f"{statistics.median(r['peak_private_mib'] for r in runs):.0f} | "
              f"{min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f} |")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
