# SPDX-License-Identifier: BSD-3-Clause
"""Variable-size samples, ringloader.DataLoader beside torch's DataLoader in
one run (issue 32, item 3), same dataset objects, same workers, same batch
size, each loader built exactly as an unchanged script builds torch's:

1. detection: photos of many sizes (bench/make_coco_folder.py, 96..640 px a
   side by default), each decoded at its native size (PIL + pil_to_tensor +
   float) with a dict target holding a variable number of boxes, labels and
   areas, ``collate_fn=lambda b: tuple(zip(*b))`` (torchvision's
   references/detection pattern), batch 2 as there;
2. tokens: int64 token sequences of length 5..300 with a label,
   ``pad_sequence`` in the collate, batch 8.

Rounds alternate torch and ringloader (each loader is built once and kept:
persistent workers on torch's side, as fair to it as it gets); each round
is one full epoch after a warm-up epoch. Prints samples/s per loader and the
ratio (ringloader / torch, median over rounds).

    /usr/bin/python3 bench/variable_size.py --build build [--rounds 3] [--workers 2]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Detection:
    """An image at its native size and a COCO-style target dict."""

    def __init__(self, root):
        with open(os.path.join(root, "annotations", "instances_train2017.json")) as f:
            coco = json.load(f)
        boxes = {}
        for a in coco["annotations"]:
            boxes.setdefault(a["image_id"], []).append(a)
        self.items = [(os.path.join(root, "train2017", i["file_name"]), i["id"],
                       boxes.get(i["id"], [])) for i in coco["images"]]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        import torch
        from PIL import Image
        from torchvision.transforms.functional import pil_to_tensor
        path, image_id, annotations = self.items[index]
        with Image.open(path) as image:
            pixels = pil_to_tensor(image.convert("RGB")).float().div_(255)
        boxes = torch.tensor([a["bbox"] for a in annotations], dtype=torch.float32)
        boxes[:, 2:] += boxes[:, :2]
        target = {"boxes": boxes,
                  "labels": torch.tensor([a["category_id"] for a in annotations]),
                  "image_id": torch.tensor([image_id]),
                  "area": torch.tensor([float(a["area"]) for a in annotations])}
        return pixels, target


class Tokens:
    """Token sequences of length 5..300 (seeded), int64, with a label."""

    def __init__(self, n, seed=0):
        import random
        rng = random.Random(seed)
        self.lengths = [rng.randint(5, 300) for _ in range(n)]

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, index):
        import torch
        length = self.lengths[index]
        tokens = (torch.arange(length, dtype=torch.int64) * 7919 + index) % 30000
        return tokens, index % 5


def detection_collate(batch):
    return tuple(zip(*batch))


def pad_collate(batch):
    import torch
    from torch.nn.utils.rnn import pad_sequence
    tokens, labels = zip(*batch)
    lengths = torch.tensor([len(t) for t in tokens])
    return pad_sequence(tokens, batch_first=True, padding_value=0), lengths, torch.tensor(labels)


def epoch_rate(loader, count_of):
    """Samples per second over one epoch; each batch is touched as a trainer
    would (one read of every image / the padded tokens)."""
    count, start = 0, time.perf_counter()
    for batch in loader:
        count += count_of(batch)
    return count / (time.perf_counter() - start)


def count_detection(batch):
    images, targets = batch
    for image, target in zip(images, targets):
        float(image[0, 0, 0])
        float(target["boxes"].sum())
    return len(images)


def count_tokens(batch):
    padded, _, _ = batch
    int(padded[:, 0].sum())
    return padded.shape[0]


def compare(name, make, count_of, rounds, sides):
    import torch
    import ringloader
    builders = {"torch": lambda: make(torch.utils.data.DataLoader, persistent_workers=True),
                "ringloader": lambda: make(ringloader.DataLoader)}
    loaders = {side: builders[side]() for side in sides}
    rates = {side: [] for side in loaders}
    for side, loader in loaders.items():
        epoch_rate(loader, count_of)  # warm-up: workers start, ring sized
    for _ in range(rounds):
        for side, loader in loaders.items():
            rates[side].append(epoch_rate(loader, count_of))
    result = {side: statistics.median(r) for side, r in rates.items()}
    result["rounds"] = rates
    line = ", ".join(f"{side} {result[side]:.1f} samples/s" for side in sides)
    if len(sides) == 2:
        result["ratio"] = result["ringloader"] / result["torch"]
        line += f", ratio {result['ratio']:.2f}x"
    if "ringloader" in loaders and callable(getattr(loaders["ringloader"], "stats", None)):
        result["ringloader_stats"] = {k: v for k, v in loaders["ringloader"].stats().items()
                                      if isinstance(v, (int, float))}
    print(f"{name}: {line} (median of {rounds} rounds)", flush=True)
    del loaders
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--coco", help="a bench/make_coco_folder.py folder "
                        "(made under /tmp when not given)")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--sequences", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["detection", "tokens"])
    parser.add_argument("--sides", default="torch,ringloader",
                        help="which loaders, comma-separated")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torch
    torch.set_num_threads(1)
    sides = args.sides.split(",")
    results = {}
    if args.only in (None, "detection"):
        root = args.coco or os.path.join(tempfile.gettempdir(),
                                         f"ringloader-coco-{args.images}")
        if not os.path.exists(os.path.join(root, "annotations")):
            sys.path.insert(0, HERE)
            from make_coco_folder import make
            make(root, train=args.images, val=1, min_side=96, max_side=640, max_boxes=8)
        dataset = Detection(root)
        results["detection"] = compare(
            "detection (native-size photos + dict targets, batch 2)",
            lambda cls, **kw: cls(dataset, batch_size=2, shuffle=True,
                                  num_workers=args.workers,
                                  collate_fn=detection_collate, **kw),
            count_detection, args.rounds, sides)
    if args.only in (None, "tokens"):
        dataset = Tokens(args.sequences)
        results["tokens"] = compare(
            "tokens (length 5..300, pad_sequence, batch 8)",
            lambda cls, **kw: cls(dataset, batch_size=8, shuffle=True,
                                  num_workers=args.workers, collate_fn=pad_collate, **kw),
            count_tokens, args.rounds, sides)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
