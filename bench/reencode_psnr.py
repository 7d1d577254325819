# SPDX-License-Identifier: BSD-3-Clause
"""What re-encoding photos at a maximum side costs in pixels: PSNR of
torchvision's evaluation view (Resize(256) + CenterCrop(224), PIL) of each
re-encoded photo against the same view of the original, and the bytes saved.

    /usr/bin/python3 bench/reencode_psnr.py ORIGINAL_DIR --options "--max-side 320" \
        [--options "--reencode-all --quality 90"] [--limit 400] [--build build]

For each --options it runs `BUILD/ringloader-shard ORIGINAL_DIR` with them
into a temporary folder, unshuffled, so that member n is the n-th file of
the folder in ImageFolder order.
"""
import argparse
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile

import numpy
from PIL import Image


def eval_view(image):
    import torchvision.transforms as T
    view = T.Compose([T.Resize(256), T.CenterCrop(224)])(image.convert("RGB"))
    return numpy.asarray(view, dtype=numpy.float64)


def psnr(a, b):
    mse = float(numpy.mean((a - b) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def measure(files, shard, limit):
    """PSNR of each re-encoded photo's evaluation view, every k-th file."""
    step = max(1, len(files) // limit)
    values, bytes_in, bytes_out = [], 0, 0
    with tarfile.open(shard) as tar:
        for member in tar.getmembers():
            position = int(member.name.split(".")[0])
            if not member.name.endswith(".jpg") or position % step:
                continue
            original = files[position]
            data = tar.extractfile(member).read()
            values.append(psnr(eval_view(Image.open(original)),
                               eval_view(Image.open(io.BytesIO(data)))))
            bytes_in += os.path.getsize(original)
            bytes_out += len(data)
    finite = [v for v in values if math.isfinite(v)]
    n = len(values)
    return {"images": n, "mean_psnr_db": round(sum(finite) / len(finite), 2),
            "min_psnr_db": round(min(finite), 2),
            "kib_original": round(bytes_in / n / 1024, 1),
            "kib_reencoded": round(bytes_out / n / 1024, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original")
    parser.add_argument("--options", action="append", required=True)
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    import torchvision
    files = [path for path, _ in torchvision.datasets.ImageFolder(args.original).samples]
    tool = os.path.join(args.build, "ringloader-shard")
    for options in args.options:
        with tempfile.TemporaryDirectory() as folder:
            shard = os.path.join(folder, "all-%d.tar")
            subprocess.run([tool, args.original, shard, "--max-count", str(len(files))]
                           + options.split(), check=True, stdout=subprocess.DEVNULL)
            result = measure(files, shard % 0, args.limit)
        print(json.dumps(dict(options=options, **result)))


if __name__ == "__main__":
    main()
