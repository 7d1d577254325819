# SPDX-License-Identifier: BSD-3-Clause
"""Streaming clients, unchanged, on torch's DataLoader and on ringloader's
(``python -m ringloader``), side by side in one run (issue 46, item 1).

Cases, each with torch's default persistent_workers=False, 2 workers,
batches of 32:
  wds        wds.WebDataset over local tar shards this bench writes
             (JPEG + class), .decode("torchrgb").to_tuple("jpg", "cls"),
             through DataLoader(batch_size=32);
  webloader  the same pipeline .batched(32) through wds.WebLoader
             (batch_size=None);
  hf         a Hugging Face dataset saved to disk and loaded back (memory
             mapped), .to_iterable_dataset(num_shards=4).shuffle(seed=0),
             .map() normalising each row, with_format("torch"), through
             DataLoader(batch_size=32).

Each side, case and epoch count runs in a fresh process (it pays its own
imports and its loader's start, as a training run does); rounds are
interleaved torch / ringloader. Per run: samples/s from building the
dataset to the end of the last epoch (the client's code: `import datasets`
and load_from_disk for hf, 0.65 s of a 1.2 s epoch on 2 cores, and the
same for both loaders but for where the interpreter's full collections
fall), the same from DataLoader(...) on ("loader"), the first batch
(seconds from building the dataset; with --gap-s, the script waits that
long after building the loader, as one building its model does, and both
count from iter()), the first batch from DataLoader(...), the median
first batch of the later epochs (from iter()), and a digest of every
batch. Prints medians and ringloader / torch (samples/s: > 1 is faster;
first batch: < 1 is sooner). Needs webdataset and datasets:

    PYTHON=/root/.cache/ringloader/venv-clients-py312/bin/python
    $PYTHON bench/clients_streams.py [--rounds 3] [--epochs 1,10] [--cases wds,webloader,hf] [--scale 8]
"""
import argparse
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SHARDS, PER_SHARD, SIDE = 8, 64, 96      # the tar shards: 512 JPEGs
HF_ROWS, HF_FEATURES = 2048, 768          # the Hugging Face table
BATCH, WORKERS = 32, 2


def make_shards(root, scale):
    import numpy as np
    import webdataset as wds
    from PIL import Image
    marker = os.path.join(root, ".done")
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(46)
    ramp = np.linspace(0, 255, SIDE * 4 // 3)[None, :, None]
    for shard in range(SHARDS * scale):
        with wds.TarWriter(os.path.join(root, f"shard-{shard:03d}.tar")) as writer:
            for i in range(PER_SHARD):
                pixels = ramp * rng.uniform(0.3, 1.0, size=(1, 1, 3)) + \
                    rng.normal(0, 25, size=(SIDE, SIDE * 4 // 3, 3))
                image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
                data = io.BytesIO()
                image.save(data, format="JPEG", quality=90)
                writer.write({"__key__": f"{shard:03d}_{i:04d}", "jpg": data.getvalue(),
                              "cls": str(i % 4).encode()})
    open(marker, "w").close()


def make_hf(root, scale):
    import datasets
    import numpy as np
    path = os.path.join(root, "hf")
    if not os.path.exists(os.path.join(path, "dataset_info.json")):
        rng = np.random.default_rng(46)
        table = datasets.Dataset.from_dict({
            "x": rng.random((HF_ROWS * scale, HF_FEATURES), dtype=np.float32),
            "label": rng.integers(0, 10, HF_ROWS * scale)})
        table.save_to_disk(path)
    return path


def _normalise(row):
    import numpy as np
    x = np.asarray(row["x"], dtype=np.float32)
    return {"x": (x - x.mean()) / (x.std() + 1e-6), "label": row["label"]}


def dataset_for(case, root, scale=1):
    """The client's own dataset."""
    if case in ("wds", "webloader"):
        import webdataset as wds
        urls = os.path.join(root, f"shard-{{000..{SHARDS * scale - 1:03d}}}.tar")
        dataset = wds.WebDataset(urls, shardshuffle=False, empty_check=False) \
            .decode("torchrgb").to_tuple("jpg", "cls")
        return dataset.batched(BATCH) if case == "webloader" else dataset
    import datasets
    return datasets.load_from_disk(os.path.join(root, "hf")) \
        .to_iterable_dataset(num_shards=4).shuffle(seed=0, buffer_size=256) \
        .map(_normalise).with_format("torch")


def loader_for(case, dataset):
    """The client's own loader: torch.utils.data.DataLoader is whichever the
    process runs with (ringloader's under ``python -m ringloader``)."""
    import torch.utils.data
    if case == "webloader":
        import webdataset as wds
        return wds.WebLoader(dataset, batch_size=None, num_workers=WORKERS)
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)


def _first_tensor(batch):
    return batch[0] if isinstance(batch, (list, tuple)) else batch["x"]


def child(case, root, epochs, gap_s=0.0, scale=1):
    """One run: prints a JSON line of its figures."""
    import torch
    start = time.perf_counter()
    dataset = dataset_for(case, root, scale)
    built = time.perf_counter()
    loader = loader_for(case, dataset)
    if gap_s:  # what a script does between its loader and its first epoch
        time.sleep(gap_s)
        start = built = time.perf_counter()
    digest, samples, first, loader_first, later = hashlib.sha256(), 0, None, None, []
    for epoch in range(epochs):
        began = time.perf_counter()
        for number, batch in enumerate(loader):
            x = _first_tensor(batch)
            if number == 0:
                now = time.perf_counter()
                if epoch == 0:
                    first, loader_first = now - start, now - built
                else:
                    later.append(now - began)
            samples += len(x)
            digest.update(x.to(torch.float64).sum().numpy().tobytes())
    end = time.perf_counter()
    print(json.dumps({"samples_s": samples / (end - start), "first": first,
                      "loader_samples_s": samples / (end - built),
                      "loader_first": loader_first,
                      "later_first": statistics.median(later) if later else None,
                      "samples": samples, "digest": digest.hexdigest()[:16]}))


def _run(side, case, root, epochs, gap_s, scale):
    here = os.path.abspath(__file__)
    prefix = ["-m", "ringloader"] if side == "ringloader" else []
    command = [sys.executable, *prefix, here, "--child", case, "--root", root,
               "--epochs", str(epochs), "--gap-s", str(gap_s), "--scale", str(scale)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{side} {case}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(runs, key):
    values = [run[key] for run in runs if run[key] is not None]
    return statistics.median(values) if values else None


def _show(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", default="1,10")
    parser.add_argument("--cases", default="wds,webloader,hf")
    parser.add_argument("--root", default=None, help="data folder (default: a temporary one)")
    parser.add_argument("--gap-s", type=float, default=0.0,
                        help="seconds between building the loader and the first iter() (a "
                             "script building its model); times then count from iter()")
    parser.add_argument("--scale", type=int, default=1,
                        help=f"data size: {SHARDS} shards of {PER_SHARD} JPEGs and {HF_ROWS} "
                             "rows times this (at 1, an epoch takes about 1.2 s on 2 cores)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.root, int(args.epochs), args.gap_s, args.scale)
    root = args.root or tempfile.mkdtemp(prefix="clients-streams-")
    if args.scale != 1:
        root = os.path.join(root, f"scale-{args.scale}")
    os.makedirs(root, exist_ok=True)
    cases = args.cases.split(",")
    if {"wds", "webloader"} & set(cases):
        make_shards(root, args.scale)
    if "hf" in cases:
        make_hf(root, args.scale)
    epoch_counts = [int(e) for e in args.epochs.split(",")]
    runs = {}
    for _ in range(args.rounds):
        for case in cases:
            for epochs in epoch_counts:
                for side in ("torch", "ringloader"):
                    runs.setdefault((case, epochs, side), []).append(
                        _run(side, case, root, epochs, args.gap_s, args.scale))
    print(f"{'':28} {'from the dataset':>19} {'from DataLoader()':>19}")
    print(f"{'case':10} {'epochs':>6} {'side':>10} {'samples/s':>10} {'first s':>8} "
          f"{'samples/s':>10} {'first s':>8} {'later first s':>13}  same batches")
    keys = ("samples_s", "first", "loader_samples_s", "loader_first")
    for case in cases:
        for epochs in epoch_counts:
            torchs, ours = runs[(case, epochs, "torch")], runs[(case, epochs, "ringloader")]
            same = {r["digest"] for r in torchs} == {r["digest"] for r in ours} and \
                len({r["digest"] for r in ours}) == 1
            for side, side_runs in (("torch", torchs), ("ringloader", ours)):
                speed, first, loader_speed, loader_first = (_median(side_runs, k) for k in keys)
                print(f"{case:10} {epochs:>6} {side:>10} {speed:>10.1f} {_show(first):>8} "
                      f"{loader_speed:>10.1f} {_show(loader_first):>8} "
                      f"{_show(_median(side_runs, 'later_first')):>13}  {same}")
            ratios = [_median(ours, k) / _median(torchs, k) for k in keys]
            print(f"{case:10} {epochs:>6} {'ratio':>10} {ratios[0]:>9.2f}x {ratios[1]:>7.2f}x "
                  f"{ratios[2]:>9.2f}x {ratios[3]:>7.2f}x")


if __name__ == "__main__":
    main()
