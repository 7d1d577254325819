#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A model, not a measurement: what the ring's depth K costs W workers
whose batch times vary, for worker counts this 2-core machine cannot run
(bench/ring_depth.py measures W = 2 for real).

The ring's rules, as loader/ring/slot_protocol.h states them: workers claim
batch ids in order, whichever is free first; batch b lives in slot b % K,
free once the trainer has released batch b - K, which it does when it takes
batch b - K + 1 (it holds one batch while it steps). The trainer takes
batches in order and spends `step` per batch. Batch times are lognormal with
mean 1 and coefficient of variation `cv`; `step` is a fraction of the
workers' batch period 1 / W (1.0: a consumer exactly at their pace, where
any queue helps most; below, the workers are the bottleneck).

Prints throughput as a share of W batches per unit time, and the workers'
time spent waiting for a slot.

    python3 bench/ring_depth_model.py [--batches 20000]
"""
import argparse
import heapq
import math
import random


def simulate(workers, slots, cv, step_fraction, batches, seed=1):
    rng = random.Random(seed)
    sigma = math.sqrt(math.log(1 + cv * cv))
    step = step_fraction / workers
    free_workers = [(0.0, w) for w in range(workers)]
    ready, taken, slot_wait = [], [], 0.0
    for batch in range(batches):
        free_at, worker = heapq.heappop(free_workers)
        oldest = batch - slots + 1  # taking it released this batch's slot
        slot_free = taken[oldest] if oldest >= 0 else 0.0
        start = max(free_at, slot_free)
        slot_wait += start - free_at
        done = start + rng.lognormvariate(-sigma * sigma / 2, sigma)
        ready.append(done)
        heapq.heappush(free_workers, (done, worker))
        while len(taken) < len(ready):  # every batch up to `batch` is ready by now
            j = len(taken)
            taken.append(max(ready[j], taken[j - 1] + step if j else 0.0))
    wall = taken[-1]
    return batches / wall / workers, slot_wait / (workers * wall)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20000)
    opts = parser.parse_args()
    print("| W | cv | step / period | " + " | ".join(
        ["K = W + 2", "K = 2W (max 4)", "K = 2W + 1", "K = 2W + 2"]) + " |")
    print("|---|---|---|---|---|---|---|")
    for workers in (2, 4, 8, 16):
        depths = [workers + 2, max(4, 2 * workers), 2 * workers + 1, 2 * workers + 2]
        for cv in (0.1, 0.3):
            for step in (0.0, 0.9, 1.0):
                cells = []
                for slots in depths:
                    rate, wait = simulate(workers, slots, cv, step, opts.batches)
                    cells.append(f"{slots}: {rate:.3f} ({wait:.1%} wait)")
                print(f"| {workers} | {cv} | {step} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
