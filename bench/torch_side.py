#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The torch side of each comparison: torch.utils.data.DataLoader on the same workloads that
ringloader-bench runs, printing images/s as JSON.

  jpeg     torchvision ImageFolder, RandomResizedCrop(224) +
           RandomHorizontalFlip + ToTensor + Normalize(ImageNet), batch 64
  fashion  Fashion-MNIST from the IDX .gz files, per item exactly what
           torchvision.datasets.FashionMNIST does (Image.fromarray(mode "L")
           -> ToTensor -> Normalize), batch 256

Both: shuffle, num_workers=2, persistent_workers=True (torch's fastest setup:
no worker re-spawn per epoch), one warm-up epoch excluded, then `epochs`
timed epochs; the loop reads one element of every batch.

  /usr/bin/python3 bench/torch_side.py jpeg --root DIR [--epochs 3]
  /usr/bin/python3 bench/torch_side.py fashion --images X.gz --labels Y.gz
  /usr/bin/python3 bench/torch_side.py profile --root DIR [--limit 300]

profile: per-image CPU time (time.thread_time, so other load on the machine
does not inflate it) of each stage of the jpeg workload in one thread:
ImageFolder's loader (open + convert("RGB"), i.e. decode), RandomResizedCrop,
RandomHorizontalFlip, ToTensor, Normalize. ringloader-bench profile measures
the same stages.
"""
import argparse
import gzip
import io
import json
import os
import platform
import sys
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
FASHION_MEAN = [0.2860]
FASHION_STD = [0.3530]


def read_idx(path):
    """An IDX file (plain or .gz) as a uint8 numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic >> 8 != 0x08:  # 0x08: unsigned byte
        sys.exit(f"{path}: not a uint8 IDX file (magic {magic:#x})")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


class IdxFashionMNIST(Dataset):
    """torchvision.datasets.FashionMNIST, fed from Debian's IDX .gz files.

    __getitem__ is torchvision's MNIST.__getitem__ line for line: the data
    live in a uint8 tensor, each item becomes a PIL "L" image, then the
    transform runs.
    """

    def __init__(self, images_path, labels_path, transform):
        self.data = torch.from_numpy(read_idx(images_path).copy())
        self.targets = torch.from_numpy(read_idx(labels_path).astype(np.int64))
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        img = Image.fromarray(img.numpy(), mode="L")
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def cpu_seconds(pids):
    """utime + stime of these processes, from /proc/PID/stat."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def run(loader, epochs, warmup_epochs):
    """Warm-up epochs (untimed), then `epochs` timed epochs."""
    sink = 0.0
    for _ in range(warmup_epochs):
        for data, target in loader:
            sink += float(data.view(-1)[0])
    warmup_sink = sink
    # persistent_workers: the same worker processes serve every epoch.
    pids = [os.getpid()] + [w.pid for w in loader._iterator._workers]
    cpu_start = cpu_seconds(pids)
    images = 0
    batches = 0
    start = time.perf_counter()
    for _ in range(epochs):
        for data, target in loader:
            sink += float(data.view(-1)[0])  # touch every batch
            images += data.shape[0]
            batches += 1
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(pids) - cpu_start
    return {"images": images, "batches": batches, "seconds": elapsed,
            "images_per_s": images / elapsed, "sink": sink,
            "warmup_sink": warmup_sink,
            "cpu_s": cpu, "cpu_us_per_image": cpu / images * 1e6,
            "load_average": os.getloadavg()[0]}


def profile(root, limit):
    """Per-stage CPU microseconds per image, one thread."""
    torch.set_num_threads(1)
    files = [path for path, _ in datasets.ImageFolder(root).samples]
    step = max(1, len(files) // limit)
    encoded = []
    for path in files[::step][:limit]:
        with open(path, "rb") as f:
            encoded.append(f.read())
    stages = [
        ("rrc", transforms.RandomResizedCrop(224)),
        ("flip", transforms.RandomHorizontalFlip()),
        ("totensor", transforms.ToTensor()),
        ("normalize", transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)),
    ]
    totals = {"decode": 0.0}
    totals.update({name: 0.0 for name, _ in stages})
    for rounds, count in ((1, min(20, len(encoded))), (0, len(encoded))):
        for data in encoded[:count]:  # a warm-up pass, then the timed pass
            start = time.thread_time()
            # torchvision's pil_loader: Image.open(f) then img.convert("RGB")
            image = Image.open(io.BytesIO(data)).convert("RGB")
            now = time.thread_time()
            if not rounds:
                totals["decode"] += now - start
            for name, op in stages:
                start = now
                image = op(image)
                now = time.thread_time()
                if not rounds:
                    totals[name] += now - start
    per_stage = {k: v / len(encoded) * 1e6 for k, v in totals.items()}
    return {"side": "torch", "workload": "profile", "images": len(encoded),
            "cpu_us_per_image_stage": per_stage,
            "cpu_us_per_image_total": sum(per_stage.values())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["jpeg", "fashion", "profile"])
    parser.add_argument("--limit", type=int, default=300,
                        help="images for profile")
    parser.add_argument("--root", help="ImageFolder root (jpeg)")
    parser.add_argument("--images", help="IDX images (fashion)")
    parser.add_argument("--labels", help="IDX labels (fashion)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=0,
                        help="0: 64 for jpeg, 256 for fashion")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    if args.workload == "profile":
        print(json.dumps(profile(args.root, args.limit)))
        return
    if args.workload == "jpeg":
        batch_size = args.batch_size or 64
        dataset = datasets.ImageFolder(args.root, transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]))
    else:
        batch_size = args.batch_size or 256
        dataset = IdxFashionMNIST(args.images, args.labels, transforms.Compose([
            transforms.ToTensor(),
            transforms.Normalize(FASHION_MEAN, FASHION_STD)]))

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                        num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    result = run(loader, args.epochs, args.warmup_epochs)
    result.update({
        "side": "torch", "workload": args.workload, "dataset_size": len(dataset),
        "batch_size": batch_size, "num_workers": args.workers,
        "epochs": args.epochs, "warmup_epochs": args.warmup_epochs,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "pillow": Image.__version__, "python": platform.python_version(),
        "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
