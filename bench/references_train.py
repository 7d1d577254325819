# SPDX-License-Identifier: BSD-3-Clause
"""torchvision's classification reference, unchanged: ``train.py`` on torch's
DataLoader and under ``python -m ringloader``, side by side in one run
(issue 43).

The reference is the one Debian's torchvision source ships
(``scripts/get_real_scripts.sh`` unpacks it into
~/.cache/ringloader/src/vision-0.14.1/references/classification), run with
the recipe behind torchvision's current weights: ``--auto-augment ta_wide
--random-erase 0.1`` (TrivialAugmentWide, PILToTensor, ConvertImageDtype,
Normalize, RandomErasing). One epoch on CPU over an ImageNet-like photo
folder (bench/make_photo_folder.py --preset imagenet), a small model so the
loader, not the model, sets the pace. Rounds alternate torch / ringloader,
each a fresh process.

--references DIR runs another copy of the reference (a newer torchvision's
references/classification, cached as ~/.cache/ringloader/src/vision-<ver>/);
--use-v2 passes train.py's own --use-v2 (torchvision >= 0.16's references:
the same recipe built from transforms.v2), refused when that train.py has no
such flag.

Prints per side the epoch's wall time (train.py's own "Total time"), the mean
of train.py's per-iteration ``data`` column (seconds the step waited for its
batch), the validation Acc@1, and whether ringloader ran the recipe natively
(no "has no native op" message); then the ratio torch / ringloader.

    /usr/bin/python3 bench/references_train.py --corpus /tmp/refs [--rounds 2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REFS = os.path.expanduser(
    "~/.cache/ringloader/src/vision-0.14.1/references/classification")


def make_corpus(root, per_class):
    for split, seed in (("train", 0), ("val", 1)):
        subprocess.run([sys.executable, os.path.join(HERE, "make_photo_folder.py"),
                        os.path.join(root, split), "--preset", "imagenet", "--classes", "10",
                        "--per-class", str(per_class if split == "train" else per_class // 5),
                        "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)


def command(side, args):
    train = os.path.join(args.references, "train.py")
    launcher = [sys.executable, "-m", "ringloader"] if side == "ringloader" else [sys.executable]
    return launcher + [
        train, "--data-path", args.corpus, "--device", "cpu", "--epochs", "1",
        "--model", args.model, "-b", str(args.batch_size), "-j", str(args.workers),
        "--auto-augment", "ta_wide", "--random-erase", "0.1",
        "--train-crop-size", str(args.crop), "--val-crop-size", str(args.crop),
        "--val-resize-size", str(args.crop * 8 // 7), "--print-freq", "1",
        "--output-dir", "", *(["--use-v2"] if args.use_v2 else []), *args.extra]


def run(side, args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if "PYTHONPATH" in env:  # train.py runs in its own folder
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep))
    started = time.monotonic()
    done = subprocess.run(command(side, args), cwd=args.references, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    out = done.stdout + done.stderr
    if done.returncode != 0:
        sys.exit(f"{side}: train.py exited {done.returncode}:\n{out[-3000:]}")
    total = re.search(r"Epoch: \[0\] Total time: (\d+):(\d+):(\d+)", out)
    epoch_s = int(total[1]) * 3600 + int(total[2]) * 60 + int(total[3]) if total else float("nan")
    waits = [float(m) for m in re.findall(r"Epoch: \[0\].*?data: ([0-9.]+)", out)]
    acc = re.findall(r"Acc@1 ([0-9.]+)", out)
    return {"wall": wall, "epoch": epoch_s, "data": statistics.mean(waits[1:] or waits or [0]),
            "acc1": acc[-1] if acc else "?", "load": open("/proc/loadavg").read().split()[0],
            "native": "has no native op" not in out,
            "fallback": [line for line in out.splitlines() if "has no native op" in line][:1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a folder for train/ and val/ (made if missing)")
    parser.add_argument("--references", default=DEFAULT_REFS,
                        help="a references/classification folder (train.py, presets.py, ...)")
    parser.add_argument("--use-v2", action="store_true", help="train.py --use-v2 (transforms.v2)")
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="shufflenet_v2_x0_5")
    parser.add_argument("--crop", type=int, default=112)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("extra", nargs="*", help="more train.py arguments (after --)")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.references, "train.py")):
        sys.exit(f"no train.py under {args.references}: run scripts/get_real_scripts.sh")
    if args.use_v2 and "--use-v2" not in open(os.path.join(args.references, "train.py")).read():
        sys.exit(f"{args.references}/train.py has no --use-v2 (torchvision < 0.16's reference)")
    make_corpus(args.corpus, args.per_class)
    import torch
    import torchvision
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, reference "
          f"{args.references}{' --use-v2' if args.use_v2 else ''}, load before "
          f"{open('/proc/loadavg').read().split()[0]} ({os.cpu_count()} cores)", flush=True)
    results = {"torch": [], "ringloader": []}
    for round_index in range(args.rounds):
        for side in ("torch", "ringloader"):
            result = run(side, args)
            results[side].append(result)
            print(f"round {round_index} {side:10s} epoch {result['epoch']:4.0f} s "
                  f"(process {result['wall']:5.1f} s), data wait {result['data']:.3f} s/step, "
                  f"Acc@1 {result['acc1']}, load {result['load']}"
                  + (f", native {result['native']} {result['fallback']}" if side == "ringloader" else ""),
                  flush=True)
    median = {side: statistics.median(r["wall"] for r in rs) for side, rs in results.items()}
    wait = {side: statistics.median(r["data"] for r in rs) for side, rs in results.items()}
    print(f"median process seconds: torch {median['torch']:.1f}, ringloader "
          f"{median['ringloader']:.1f}, ratio torch/ringloader "
          f"{median['torch'] / median['ringloader']:.2f}x; data wait per step "
          f"{wait['torch']:.3f} vs {wait['ringloader']:.3f} s")


if __name__ == "__main__":
    main()
