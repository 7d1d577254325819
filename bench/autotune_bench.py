#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""num_workers="auto" against fixed worker counts (issue 16, item 3).

  /usr/bin/python3 bench/autotune_bench.py [--photos DIR] [--seconds 8]

A trainer that takes batches at a fixed rate (it sleeps `step` ms per
batch, standing in for a model: fast 0 ms, medium 30 ms, slow 100 ms) reads
a JPEG ImageFolder (bench/make_photo_folder.py, 400 photos) through
RandomResizedCrop(224)+flip+ToTensor+Normalize, batch 32, shuffled, for
--seconds of wall time (epochs repeat). Each configuration runs in its own
process: fixed 1, 2 and 3 workers, and "auto". Reported per configuration:
images/s over the whole run (the autotuner's ramp included), CPU time of
the run (trainer + workers, from getrusage of the finished process) per
image, the worker count at the end and, for auto, its decisions.
Prints a table (stderr) and JSON (stdout).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RATES = {"fast": 0.0, "medium": 0.030, "slow": 0.100}


def one(photos, workers, step_s, seconds):
    import ringloader
    from ringloader import transforms as T
    pipeline = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = ringloader.datasets.ImageFolder(photos, pipeline)
    loader = ringloader.DataLoader(dataset, batch_size=32, shuffle=True, seed=1,
                                   num_workers=workers if workers == "auto" else int(workers))
    images = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for x, _ in loader:
            images += x.shape[0]
            if step_s:
                time.sleep(step_s)
            if time.perf_counter() - start >= seconds:
                break
    elapsed = time.perf_counter() - start
    stats = loader.stats()
    print(json.dumps({"images_per_s": images / elapsed, "images": images,
                      "workers_at_end": stats["workers"],
                      "stall_share": stats["trainer_wait_s"] / stats["wall_s"],
                      "decisions": stats["autotune_decisions"]}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", default="/tmp/ringloader-bench/photos-10x40")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--one", nargs=3, metavar=("WORKERS", "STEP_S", "SECONDS"))
    args = parser.parse_args()
    if args.one:
        one(args.photos, args.one[0], float(args.one[1]), float(args.one[2]))
        return
    subprocess.run([sys.executable, os.path.join(HERE, "make_photo_folder.py"), args.photos,
                    "--classes", "10", "--per-class", "40"], check=True)
    results = []
    print(f"{os.cpu_count()} cores, load average "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}", file=sys.stderr)
    for rate, step_s in RATES.items():
        for workers in ("1", "2", "3", "auto"):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run([sys.executable, __file__, "--photos", args.photos, "--one",
                                   workers, str(step_s), str(args.seconds)],
                                  check=True, stdout=subprocess.PIPE, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            r.update({"rate": rate, "step_ms": step_s * 1000, "num_workers": workers,
                      "cpu_s": round(cpu, 2),
                      "cpu_ms_per_image": round(1000 * cpu / max(1, r["images"]), 3)})
            results.append(r)
            print(f"{rate:6s} (step {step_s * 1000:3.0f} ms) workers={workers:4s}: "
                  f"{r['images_per_s']:6.0f} img/s, CPU {r['cpu_ms_per_image']:.2f} ms/img, "
                  f"stall {100 * r['stall_share']:3.0f}%, ends with {r['workers_at_end']}"
                  + (f"; {r['decisions']}" if workers == "auto" else ""), file=sys.stderr)
    print(json.dumps({"cores": os.cpu_count(), "seconds": args.seconds,
                      "load_average_end": open("/proc/loadavg").read().split()[:3],
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
