#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""train_classifier.py: the Python twin of ringloader-train.

Fashion-MNIST (Debian's dataset-fashion-mnist) is exported once to a PNG
ImageFolder, reading the IDX files through ringloader.DataLoader; a small CNN
is then trained from that folder with torchvision-style augmentation decoded
by ringloader's native workers. With --data DIR: any RGB ImageFolder with
train/ and val/ (or test/), RandomResizedCrop(224) and a small ResNet.

    PYTHONPATH=build/python /usr/bin/python3 samples/train_classifier.py

Exit status: 0, 1 when a target was missed, 2 for a usage error.
The export folder and its marker are the same as the C++ sample's, so either
one's export serves both.
"""
import argparse
import math
import os
import random
import shutil
import sys
import time

# libtorch's OpenMP threads spin while waiting for work; on a small machine
# shared with ringloader's worker processes that stalls every parallel region
# (5x slower epochs on 2 busy cores). libgomp reads this once, at import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ringloader  # noqa: E402
from ringloader import transforms as T  # noqa: E402

CLASS_FOLDERS = ["0_T-shirt_top", "1_Trouser", "2_Pullover", "3_Dress", "4_Coat",
                 "5_Sandal", "6_Shirt", "7_Sneaker", "8_Bag", "9_Ankle_boot"]
MARKER = "EXPORT_COMPLETE"


class UsageError(Exception):
    pass


def display_name(folder):
    prefix, _, rest = folder.partition("_")
    if not rest or not prefix.isdigit():
        return folder
    return "T-shirt/top" if rest == "T-shirt_top" else rest.replace("_", " ")


def export_fashion_mnist(idx_dir, cache):
    """<cache>/fashion-mnist-png/{train,test}/<k>_<class>/<index>.png, once."""
    from PIL import Image
    root = os.path.join(cache, "fashion-mnist-png")
    if os.path.exists(os.path.join(root, MARKER)):
        return root
    for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        if not os.path.exists(os.path.join(idx_dir, name)):
            raise UsageError(f"missing {os.path.join(idx_dir, name)} (install "
                             "dataset-fashion-mnist or pass --fashion-mnist DIR)")
    os.makedirs(cache, exist_ok=True)
    if os.path.exists(root):  # no marker: an interrupted export
        shutil.rmtree(root)
    staging = f"{root}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    print(f"exporting Fashion-MNIST to PNG files in {root} ...", file=sys.stderr)
    start = time.time()
    for split, train in (("train", True), ("test", False)):
        for folder in CLASS_FOLDERS:
            os.makedirs(os.path.join(staging, split, folder))
        dataset = ringloader.datasets.FashionMNIST(idx_dir, train=train)
        loader = ringloader.DataLoader(dataset, batch_size=1000)  # uint8 NHWC
        index = 0
        for images, labels in loader:
            for image, label in zip(images.numpy(), labels.tolist()):
                Image.fromarray(image[:, :, 0], mode="L").save(
                    os.path.join(staging, split, CLASS_FOLDERS[label], f"{index:05d}.png"),
                    compress_level=1)
                index += 1
    with open(os.path.join(staging, MARKER), "w") as f:
        f.write("python export\n")
    try:
        os.rename(staging, root)
    except OSError:  # another run finished first
        shutil.rmtree(staging, ignore_errors=True)
    print(f"exported in {time.time() - start:.1f} s", file=sys.stderr)
    return root


def subset(dataset, limit, seed, transform, mode):
    samples = list(dataset.samples)
    if limit and limit < len(samples):
        random.Random(seed).shuffle(samples)
        samples = samples[:limit]
    return ringloader.datasets.FileList(samples, transform=transform, mode=mode)


def conv_bn_relu(cin, cout, stride=1, kernel=3):
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def small_cnn(num_classes):
    return nn.Sequential(
        *conv_bn_relu(1, 32), nn.MaxPool2d(2), *conv_bn_relu(32, 64), nn.MaxPool2d(2),
        *conv_bn_relu(64, 128), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2),
        nn.Linear(128 * 3 * 3, num_classes))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(*conv_bn_relu(cin, cout, stride),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(cout))
        self.shortcut = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


def small_resnet(num_classes):
    layers, cin = [*conv_bn_relu(3, 32, 2, 7), nn.MaxPool2d(3, 2, 1)], 32
    for stage, width in enumerate((32, 64, 128, 256)):
        layers.append(BasicBlock(cin, width, 1 if stage == 0 else 2))
        cin = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(cin, num_classes))


def make_experiment(args):
    if args.data is None:
        root = export_fashion_mnist(args.fashion_mnist, args.cache)
        mean, std = [0.2860], [0.3530]
        train_tf = T.Compose([T.RandomCrop(28, padding=2), T.RandomHorizontalFlip(),
                              T.ToTensor(), T.Normalize(mean, std)])
        # CenterCrop(28) is a no-op on 28x28 images, but ringloader needs an
        # output size that does not depend on the files.
        test_tf = T.Compose([T.CenterCrop(28), T.ToTensor(), T.Normalize(mean, std)])
        train_dir, test_dir, mode = f"{root}/train", f"{root}/test", "L"
        model, epochs, lr, wd = small_cnn(10), 12, 4e-3, 5e-4
    else:
        if not os.path.isdir(os.path.join(args.data, "train")):
            raise UsageError(f"--data: {args.data} has no train/ sub-folder")
        test_dir = next((os.path.join(args.data, d) for d in ("val", "test")
                         if os.path.isdir(os.path.join(args.data, d))), None)
        if test_dir is None:
            raise UsageError(f"--data: {args.data} has neither val/ nor test/")
        mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
        train_tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                              T.ToTensor(), T.Normalize(mean, std)])
        test_tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                             T.Normalize(mean, std)])
        train_dir, mode = os.path.join(args.data, "train"), "RGB"
        model, epochs, lr, wd = None, 30, 2e-3, 0.05
    train_full = ringloader.datasets.ImageFolder(train_dir, mode=mode)
    test_full = ringloader.datasets.ImageFolder(test_dir, mode=mode)
    if train_full.classes != test_full.classes:
        raise UsageError(f"the classes of {train_dir} and {test_dir} differ")
    classes = [display_name(c) for c in train_full.classes]
    if model is None:
        model = small_resnet(len(classes))
    return dict(train=subset(train_full, args.limit_train, args.seed, train_tf, mode),
                test=subset(test_full, args.limit_test, args.seed + 1, test_tf, mode),
                classes=classes, mean=mean, std=std, model=model,
                epochs=args.epochs or epochs, lr=args.lr or lr, wd=wd)


def save_grid(path, images, labels, classes, mean, std):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = min(64, images.shape[0])
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    x = images[:n].float() * torch.tensor(std).view(1, -1, 1, 1) + torch.tensor(mean).view(1, -1, 1, 1)
    x = x.clamp(0, 1).permute(0, 2, 3, 1).numpy()
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.2, rows * 1.35))
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < n:
            ax.imshow(x[i].squeeze(), cmap="gray" if x.shape[3] == 1 else None,
                      vmin=0, vmax=1)
            ax.set_title(classes[int(labels[i])], fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save_curves(path, history):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = range(1, len(history) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((left, "loss", "Cross-entropy loss"), (right, "acc", "Accuracy (%)")):
        scale = 100 if key == "acc" else 1
        for split in ("train", "test"):
            ax.plot(epochs, [h[f"{split}_{key}"] * scale for h in history], "o-", label=split)
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def evaluate(model, loader, device):
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss_sum += F.cross_entropy(logits, labels, reduction="sum").item()
            correct += (logits.argmax(1) == labels).sum().item()
            seen += labels.numel()
    return loss_sum / max(seen, 1), correct / max(seen, 1)


def progress(label, done, total, images, seconds, loss, stall, tty, end=""):
    bar = "#" * (24 * done // total) + "." * (24 - 24 * done // total)
    rate = images / seconds if seconds > 0.2 else 0
    line = (f"{label} [{bar}] {done}/{total}  {rate:6.0f} img/s  loss {loss:.4f}  "
            f"stall {100 * stall:4.1f}%  {seconds:3.0f}s{end}")
    print(("\r" + line + "\x1b[K") if tty else line, end="" if tty and not end else "\n",
          file=sys.stderr, flush=True)


def train(args, e):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {args.device}: CUDA is not available; use --device cpu")
    torch.set_num_threads(args.threads or os.cpu_count())
    torch.manual_seed(args.seed)
    order = torch.Generator().manual_seed(args.seed)
    train_loader = ringloader.DataLoader(
        e["train"], batch_size=args.batch_size, shuffle=True, generator=order,
        num_workers=args.workers, drop_last=len(e["train"]) >= args.batch_size,
        seed=args.seed)
    test_loader = ringloader.DataLoader(e["test"], batch_size=max(args.batch_size, 500),
                                        num_workers=args.workers, seed=args.seed)
    model = e["model"].to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=e["lr"], weight_decay=e["wd"])
    steps = len(train_loader) * e["epochs"]
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, e["lr"], total_steps=steps,
                                                   pct_start=0.25)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "checkpoint_py.pt")
    history, losses, start_epoch = [], [], 0
    if args.resume:
        try:
            ckpt = torch.load(args.resume, map_location=device)
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            schedule.load_state_dict(ckpt["schedule"])
        except (OSError, RuntimeError, KeyError) as error:
            raise UsageError(f"--resume: cannot load {args.resume}: {error}")
        history, losses, start_epoch = ckpt["history"], ckpt["losses"], ckpt["epoch"]
    tty = sys.stderr.isatty()
    run_start, train_s = time.time(), 0.0
    for epoch in range(start_epoch, e["epochs"]):
        # The loader's position: shuffle order and augmentation per epoch.
        order.manual_seed(args.seed * 1000003 + epoch)
        train_loader.set_epoch(epoch)
        model.train()
        wait0, t0 = train_loader.stats()["trainer_wait_s"], time.time()
        loss_sum = correct = seen = 0
        label = f"epoch {epoch + 1}/{e['epochs']}"
        next_plain, total = 0, len(train_loader)
        for done, (images, labels) in enumerate(train_loader, 1):
            if epoch == start_epoch and done == 1:
                save_grid(os.path.join(args.out, "batch_grid_py.png"), images, labels,
                          e["classes"], e["mean"], e["std"])
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            loss_sum += losses[-1] * labels.numel()
            correct += (logits.argmax(1) == labels).sum().item()
            seen += labels.numel()
            if (tty and done % 5 == 0) or (not tty and done >= next_plain and done < total):
                next_plain = done + (total + 3) // 4
                elapsed = time.time() - t0
                progress(label, done, total, seen, elapsed, losses[-1],
                         (train_loader.stats()["trainer_wait_s"] - wait0) / elapsed, tty)
        elapsed = time.time() - t0
        train_s += elapsed
        stall = (train_loader.stats()["trainer_wait_s"] - wait0) / elapsed
        test_loss, test_acc = evaluate(model, test_loader, device)
        history.append(dict(train_loss=loss_sum / seen, train_acc=correct / seen,
                            test_loss=test_loss, test_acc=test_acc))
        progress(label, total, total, seen, elapsed, losses[-1], stall, tty,
                 end=f"  | test loss {test_loss:.4f} acc {100 * test_acc:.2f}%")
        torch.save(dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                        schedule=schedule.state_dict(), epoch=epoch + 1,
                        history=history, losses=losses), ckpt_path)
        save_curves(os.path.join(args.out, "training_curves_py.png"), history)
    accuracy = history[-1]["test_acc"] if history else evaluate(model, test_loader, device)[1]
    s = train_loader.stats()
    total_s = time.time() - run_start
    print(f"\nwhere the time went ({total_s:.1f} s): training loop {train_s:.1f} s; "
          f"workers decode {s['decode_s']:.1f} s, transform {s['transform_s']:.1f} s, "
          f"wait for slot {s['slot_wait_s']:.1f} s; trainer stall {s['trainer_wait_s']:.2f} s "
          f"({100 * s['trainer_wait_s'] / max(train_s, 1e-9):.1f}% of the training loop)")
    print(train_loader.stats_text())
    print(f"final test accuracy: {100 * accuracy:.2f}% after {len(history)} epochs")
    status = 0
    if accuracy < args.target_accuracy:
        print(f"FAILED: below the target {100 * args.target_accuracy:.2f}%")
        status = 1
    if args.check_loss_falls:
        q = len(losses) // 4
        first, last = (sum(losses[:q]) / q, sum(losses[-q:]) / q) if q else (0, 0)
        print(f"mean loss first quarter {first:.4f}, last quarter {last:.4f}")
        if not q or last >= first:
            print("FAILED: the loss does not fall")
            status = 1
    return status


def main():
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                         os.path.expanduser("~/.cache"), "ringloader")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data")
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--cache", default=cache)
    p.add_argument("--out", default="./ringloader-out")
    p.add_argument("--epochs", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--resume")
    p.add_argument("--limit-train", type=int, default=0)
    p.add_argument("--limit-test", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.91)
    p.add_argument("--check-loss-falls", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()  # exits 2 on a bad option
    if args.epochs < 0 or args.batch_size < 1 or args.workers < 0:
        p.error("--epochs, --batch-size and --workers must be positive")
    try:
        return train(args, make_experiment(args))
    except (UsageError, ringloader.DataIOError, ringloader.OptionError) as error:
        print(f"train_classifier.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
