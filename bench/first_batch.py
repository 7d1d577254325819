# SPDX-License-Identifier: BSD-3-Clause
"""Time to the first batch with a Python dataset: torch's DataLoader against
ringloader's, in one run, each in a fresh interpreter (a training script's
start), on a torchvision ImageFolder of small JPEGs that this script makes.

    PYTHONPATH=build/python /usr/bin/python3 bench/first_batch.py [--repeats 3]

Prints, per loader, the median over repeats of
  construct: DataLoader(...) called -> first batch in hand
  script:    interpreter start -> first batch in hand (imports included)
ringloader runs its Python workers (native=False where the loader has that
option), the path a dataset it cannot make natively takes. Its zygote is
forked at import (the default); the "ringloader-spawn" row spawns it
instead (RINGLOADER_ZYGOTE=spawn: what happens when the trainer had
threads or CUDA when it imported ringloader). --model builds a
torchvision ResNet-50 between the imports and the loader, as a training
script does before its first batch.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import time
start = time.perf_counter()
import sys
import torch
import torchvision
from torchvision import transforms as T
kind, root = sys.argv[1], sys.argv[2]
if "heavy" in sys.argv[3:]:  # a training script whose main module imports more
    import scipy.ndimage, skimage.filters  # noqa: E401,F401
if kind == "ringloader":
    import inspect
    import ringloader
    Loader = ringloader.DataLoader
    extra = ({"native": False}
             if "native" in inspect.signature(Loader).parameters else {})
else:
    Loader, extra = torch.utils.data.DataLoader, {}
if __name__ == "__main__":
    if "model" in sys.argv[3:]:
        import torchvision.models
        torchvision.models.resnet50()
    dataset = torchvision.datasets.ImageFolder(
        root, transform=T.Compose([T.RandomResizedCrop(32), T.ToTensor()]))
    built = time.perf_counter()
    loader = Loader(dataset, batch_size=8, shuffle=True, num_workers=2, **extra)
    images, labels = next(iter(loader))
    done = time.perf_counter()
    assert images.shape == (8, 3, 32, 32), images.shape
    print(f"RESULT {done - built:.4f} {done - start:.4f}")
"""


def make_folder(root, classes=4, per_class=16, size=64):
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(0)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c}"), exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(root, f"class{c}", f"{i}.jpg"))


def run(kind, root, script, heavy=False, model=False):
    env = dict(os.environ)
    if kind == "ringloader-spawn":  # the zygote spawned, not forked at import
        env["RINGLOADER_ZYGOTE"] = "spawn"
    out = subprocess.run([sys.executable, script, kind.split("-")[0], root]
                         + (["heavy"] if heavy else []) + (["model"] if model else []),
                         capture_output=True, text=True, timeout=120, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return tuple(float(v) for v in line.split()[1:])
    raise RuntimeError(f"{kind} run failed:\n{out.stdout}\n{out.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--heavy-main", action="store_true",
                        help="the script's main module also imports scipy and "
                             "skimage (workers that re-ran main paid for it)")
    parser.add_argument("--model", action="store_true",
                        help="build a ResNet-50 between the imports and the loader")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "images")
        make_folder(root)
        script = os.path.join(tmp, "first_batch_child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        results = {"torch": [], "ringloader": [], "ringloader-spawn": []}
        for _ in range(args.repeats):  # interleaved: both see the same load
            for kind in results:
                results[kind].append(run(kind, root, script, args.heavy_main, args.model))
    print(f"time to first batch, ImageFolder of 64 JPEGs, 2 workers, "
          f"median of {args.repeats}"
          f"{', main imports scipy + skimage' if args.heavy_main else ''}"
          f"{', ResNet-50 built before the loader' if args.model else ''}:")
    for kind, runs in results.items():
        construct = statistics.median(r[0] for r in runs)
        whole = statistics.median(r[1] for r in runs)
        print(f"  {kind:16s} construct->first batch {construct:6.3f} s   "
              f"script start->first batch {whole:6.3f} s")


if __name__ == "__main__":
    main()
