# SPDX-License-Identifier: BSD-3-Clause
"""ringloader against the other data loaders, same photos, same work, one run.

Every round runs each peer once, in a fresh interpreter (one_run.py), peers
in the same order each round, so load from elsewhere on the machine falls on
all of them alike; the figures are medians over the rounds. Prints a JSON
line per run (to --out as well) and the table with ratios
ringloader / peer.

    python bench/peers/bench.py --data DIR [--rounds 3] [--peers a,b,...]

DIR is what run.sh prepared (imagenet-10x200/, shards/, shards-256-q90/,
litdata/, mosaic/, photos-q95.beton, photos-256-q90.beton). `--python PEER=PYTHON`
runs a peer with another interpreter (torch-simd: the Pillow-SIMD venv).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PEERS = ("torch,torch-simd,torchdata-nodes,torchdata-nodes-thread,spdl,dali-cpu,"
                 "ffcv,ringloader-exact,ringloader-fast,ringloader-exact-noprestart,"
                 "ringloader-fast-noprestart,webdataset,litdata,mosaic,"
                 "ringloader-tar-exact,ringloader-tar-fast,ffcv-recipe,"
                 "ringloader-small-exact,ringloader-small-fast")

# What each peer reads, and which ringloader rows it is compared with.
DATA = {
    "webdataset": "tar shards", "litdata": "LitData chunks (same JPEG bytes)",
    "mosaic": "Mosaic MDS shards (same JPEG bytes)",
    "ffcv": "FFCV .beton, re-encoded q95, full size",
    "ffcv-recipe": "FFCV .beton, max side 256, q90, half raw",
    "ringloader-tar-exact": "tar shards", "ringloader-tar-fast": "tar shards",
    "ringloader-small-exact": "tar shards re-encoded max side 256, q90",
    "ringloader-small-fast": "tar shards re-encoded max side 256, q90",
}
COMPARE = {
    "webdataset": ("ringloader-tar-exact", "ringloader-tar-fast"),
    "litdata": ("ringloader-tar-exact", "ringloader-tar-fast"),
    "mosaic": ("ringloader-tar-exact", "ringloader-tar-fast"),
    "ffcv-recipe": ("ringloader-small-exact", "ringloader-small-fast"),
}
FOLDER_PAIR = ("ringloader-exact", "ringloader-fast")


def run_args(args, data):
    return ["--folder", f"{data}/imagenet-10x200",
            "--shards", f"{data}/shards/train-{{000000..000015}}.tar",
            "--small-shards", f"{data}/shards-256-q90/train-{{000000..000015}}.tar",
            "--litdata-dir", f"{data}/litdata",
            "--mosaic-dir", f"{data}/mosaic",
            "--ffcv-exact", f"{data}/photos-q95.beton",
            "--ffcv-recipe", f"{data}/photos-256-q90.beton",
            "--epochs", str(args.epochs), "--workers", str(args.workers),
            "--batch-size", str(args.batch_size)]


def one(peer, args, pythons):
    python = pythons.get(peer, sys.executable)
    command = [python, os.path.join(HERE, "one_run.py"), peer] + run_args(args, args.data)
    load = open("/proc/loadavg").read().split()[0]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"peer": peer, "error": f"exit {done.returncode}: " + " | ".join(tail)}
    result = json.loads(lines[-1])
    result["load_before"] = float(load)
    return result


def median(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def table(results, peers):
    stats = {}
    for peer in peers:
        runs = [r for r in results if r["peer"] == peer and "error" not in r]
        if runs:
            stats[peer] = {k: median(runs, k) for k in
                           ("img_per_s", "cpu_s_per_1000", "peak_pss_mib",
                            "peak_private_mib", "first_batch_s")}
            stats[peer]["rounds"] = [round(r["img_per_s"]) for r in runs]
            stats[peer]["load"] = [float(r["loadavg"][0]) for r in runs]
    lines = ["| peer | data | img/s (median; rounds) | CPU s / 1000 img | peak PSS MiB "
             "| peak anon + shmem MiB | first batch s | load avg (1 min) "
             "| ringloader exact / peer | ringloader fast / peer |", "|---" * 10 + "|"]
    for peer in peers:
        errors = [r["error"] for r in results if r["peer"] == peer and "error" in r]
        if peer not in stats:
            lines.append(f"| {peer} | | failed: {errors[0] if errors else 'not run'} "
                         "| | | | | | | |")
            continue
        s = stats[peer]
        exact, fast = COMPARE.get(peer, FOLDER_PAIR)
        ratio = [f"{stats[r]['img_per_s'] / s['img_per_s']:.2f}x" if r in stats and
                 not peer.startswith("ringloader") else "" for r in (exact, fast)]
        private = "" if s["peak_private_mib"] is None else f"{s['peak_private_mib']:.0f}"
        lines.append(
            f"| {peer} | {DATA.get(peer, 'JPEG folder')} | {s['img_per_s']:.0f}; "
            f"{', '.join(map(str, s['rounds']))} | {s['cpu_s_per_1000']:.2f} | "
            f"{s['peak_pss_mib']:.0f} | {private} | {s['first_batch_s']:.2f} | "
            f"{min(s['load']):.1f}-{max(s['load']):.1f} | {ratio[0]} | {ratio[1]} |")
    return "\n".join(lines), stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--peers", default=DEFAULT_PEERS)
    parser.add_argument("--python", action="append", default=[],
                        help="PEER=PYTHON: run PEER with this interpreter")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--out", help="JSON lines file (appended)")
    parser.add_argument("--table", help="only print the table of a JSON lines file")
    args = parser.parse_args()
    peers = args.peers.split(",")
    if args.table:
        with open(args.table) as f:
            results = [json.loads(line) for line in f if line.startswith("{")]
        print(table(results, [p for p in peers if any(r["peer"] == p for r in results)])[0])
        return
    pythons = dict(spec.split("=", 1) for spec in args.python)
    print(f"machine: {os.cpu_count()} cores, load average "
          f"{open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    results = []
    for round_ in range(args.rounds):
        for peer in peers:
            if peer in pythons and not os.path.exists(pythons[peer]):
                continue
            start = time.perf_counter()
            result = one(peer, args, pythons)
            result["round"] = round_
            results.append(result)
            line = json.dumps(result)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")
            print(f"  round {round_} {peer}: {time.perf_counter() - start:.0f} s",
                  file=sys.stderr)
    text, _ = table(results, peers)
    print(text)


if __name__ == "__main__":
    main()
