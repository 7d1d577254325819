# SPDX-License-Identifier: BSD-3-Clause
"""Real clients, unchanged, on torch's DataLoader and on ringloader's
(``python -m ringloader``), side by side in one run (issue 46).

Cases (each a fresh process per side and round, so each pays its own
imports and worker starts, as a training run does):
  timm       timm.data.create_loader(use_multi_epochs_loader=True), as
             ``train.py --use-multi-epochs-loader --no-aug --no-prefetcher``
             builds it (shuffle, drop_last, persistent workers, timm's
             worker_init_fn), over a generated ImageFolder of JPEGs, 2
             workers, training a small conv net for --epochs epochs on CPU;
  lightning  lightning.Trainer.fit with seed_everything(0, workers=True)
             (Lightning assigns worker_init_fn to the loader after it was
             built) over a Python dataset, shuffle, 2 workers, --epochs;
  hf-map     Hugging Face datasets: load_dataset("imagefolder") of the
             generated folder, .with_transform (resize, to tensor), a
             DataLoader (shuffle, 2 workers, batch 32): seconds from
             building the loader to its first batch (what the first step
             waits for; the dataset's own loading is not counted).

Each child prints the seconds from building the loader to the end of
training and a digest of what it saw (every batch's sums, the final
weights); the rounds are interleaved torch / ringloader. Prints median
seconds, the ratio (torch / ringloader: > 1 means ringloader is faster)
and whether the digests are identical. Needs timm and lightning:

    PYTHON=/root/.cache/ringloader/venv-clients-py312/bin/python
    $PYTHON bench/clients.py [--rounds 3] [--epochs 3] [--cases timm,lightning,hf-map]
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CLASSES, PER_CLASS, SIDE = 4, 64, 96  # the generated ImageFolder


def make_image_folder(root):
    """CLASSES folders of PER_CLASS JPEGs (SIDE x SIDE*4/3, gradients and
    noise, seeded): decoding and resizing cost what small photos cost."""
    import numpy as np
    from PIL import Image
    marker = os.path.join(root, ".done")
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(46)
    ramp = np.linspace(0, 255, SIDE * 4 // 3)[None, :, None]
    for label in range(CLASSES):
        folder = os.path.join(root, f"class{label}")
        os.makedirs(folder, exist_ok=True)
        for i in range(PER_CLASS):
            base = ramp * rng.uniform(0.3, 1.0, size=(1, 1, 3)) + 40 * label
            pixels = base + rng.normal(0, 25, size=(SIDE, SIDE * 4 // 3, 3))
            image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
            image.save(os.path.join(folder, f"{i:04d}.jpg"), quality=90)
    open(marker, "w").close()


def _small_net(classes):
    import torch
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, classes))


def _weights_digest(model, digest):
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def run_timm(root, epochs):
    import timm.data
    import torch
    torch.manual_seed(0)
    model = _small_net(CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = time.perf_counter()
    dataset = timm.data.create_dataset("", root=root, split="train", is_training=True)
    loader = timm.data.create_loader(
        dataset, input_size=(3, 64, 64), batch_size=16, is_training=True, no_aug=True,
        use_prefetcher=False, num_workers=2, use_multi_epochs_loader=True,
        device=torch.device("cpu"))
    digest = hashlib.sha256()
    for _ in range(epochs):
        for images, targets in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(images), targets).backward()
            optimizer.step()
            digest.update(f"{images.sum().item():.6e}{targets.tolist()}".encode())
    seconds = time.perf_counter() - start
    return seconds, _weights_digest(model, digest), type(loader).__mro__[1].__module__


class Points:
    """A Python dataset: sample i is computed from i (some CPU per sample)."""

    def __len__(self):
        return 1024

    def __getitem__(self, i):
        import torch
        g = torch.Generator().manual_seed(i)
        x = torch.randn(64, generator=g)
        for _ in range(10):
            x = torch.tanh(x @ torch.ones(64, 64) / 64 + x)
        return x, int(x.sum() > 0)


def run_lightning(epochs):
    import lightning
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Data(Points, Dataset):
        pass

    class Model(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(64, 2)
            self.digest = hashlib.sha256()

        def training_step(self, batch, index):
            x, y = batch
            self.digest.update(f"{x.sum().item():.6e}{y.tolist()}".encode())
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    lightning.seed_everything(0, workers=True, verbose=False)
    model = Model()
    start = time.perf_counter()
    loader = DataLoader(Data(), batch_size=32, shuffle=True, num_workers=2)
    trainer = lightning.Trainer(max_epochs=epochs, accelerator="cpu", devices=1,
                                logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, loader)
    seconds = time.perf_counter() - start
    return seconds, _weights_digest(model, model.digest), type(loader).__module__


def run_hf_map(root):
    import datasets
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader
    torch.manual_seed(0)
    data = datasets.load_dataset("imagefolder", data_dir=root, split="train")
    resize = T.Compose([T.Resize((64, 64)), T.ToTensor()])

    def transform(batch):
        batch["pixel_values"] = [resize(image.convert("RGB")) for image in batch["image"]]
        del batch["image"]
        return batch

    data = data.with_transform(transform)
    start = time.perf_counter()
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2)
    first = next(iter(loader))
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(first["pixel_values"].numpy().tobytes())
    digest.update(str(first["label"].tolist()).encode())
    return seconds, digest.hexdigest()[:16], type(loader).__module__


def _child(args):
    if args.case == "timm":
        seconds, digest, loader = run_timm(args.root, args.epochs)
    elif args.case == "hf-map":
        seconds, digest, loader = run_hf_map(args.root)
    else:
        seconds, digest, loader = run_lightning(args.epochs)
    print("RESULT " + json.dumps({"seconds": seconds, "digest": digest, "loader": loader}))


def _run_side(case, side, root, epochs):
    command = [sys.executable] + (["-m", "ringloader"] if side == "ringloader" else [])
    command += [os.path.abspath(__file__), "--child", case, "--root", root,
                "--epochs", str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{case} on {side} failed (exit {done.returncode})")
    return json.loads(lines[-1][len("RESULT "):])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--cases", default="timm,lightning,hf-map")
    parser.add_argument("--root", default=None, help="ImageFolder (generated if absent)")
    parser.add_argument("--child", choices=["timm", "lightning", "hf-map"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.case = args.child
        return _child(args)
    root = args.root or os.path.join(tempfile.gettempdir(), "ringloader-clients-folder")
    make_image_folder(root)
    import datasets
    import lightning
    import timm
    import torch
    print(f"torch {torch.__version__}, timm {timm.__version__}, lightning "
          f"{lightning.__version__}, datasets {datasets.__version__}; "
          f"{os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; {args.epochs} epochs, {args.rounds} rounds, "
          f"interleaved; seconds from building the loader to the end of training")
    print(f"{'case':<10} {'torch s':>9} {'ringloader s':>13} {'ratio':>7} {'extra s':>8}  "
          "identical")
    for case in args.cases.split(","):
        seconds = {"torch": [], "ringloader": []}
        digests = {"torch": set(), "ringloader": set()}
        for _ in range(args.rounds):
            for side in ("torch", "ringloader"):
                result = _run_side(case, side, root, args.epochs)
                if side == "ringloader" and "ringloader" not in result["loader"]:
                    raise SystemExit(f"{case}: the loader was {result['loader']}, not ringloader's")
                seconds[side].append(result["seconds"])
                digests[side].add(result["digest"])
        torch_s = statistics.median(seconds["torch"])
        ring_s = statistics.median(seconds["ringloader"])
        same = len(digests["torch"]) == 1 and digests["torch"] == digests["ringloader"]
        print(f"{case:<10} {torch_s:9.2f} {ring_s:13.2f} {torch_s / ring_s:6.2f}x "
              f"{ring_s - torch_s:+8.2f}  "
              f"{'yes' if same else 'NO: ' + str(digests)}", flush=True)


if __name__ == "__main__":
    main()
