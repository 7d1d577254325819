# SPDX-License-Identifier: BSD-3-Clause
"""Unchanged training scripts, run once with torch's DataLoader and once
under ``python -m ringloader`` (DataLoader swapped, nothing else changed).

The two scripts here are our own smoke versions of the data paths of the
public scripts recorded in docs/drop_in.md: pytorch/examples' mnist/main.py
(torchvision MNIST with download=True over files already present, in-process
loading, a seeded model) and imagenet/main.py (ImageFolder train/val
folders, RandomResizedCrop / Resize+CenterCrop, workers, pin_memory,
``.to(device, non_blocking=True)``, top-1 accuracy meters).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import write_idx, write_image_folder

MNIST_SCRIPT = textwrap.dedent("""
    import argparse
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torchvision import datasets, transforms

    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    args = parser.parse_args()
    torch.manual_seed(1)
    transform = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize((0.1307,), (0.3081,))])
    train = datasets.MNIST(args.root, train=True, download=True, transform=transform)
    test = datasets.MNIST(args.root, train=False, transform=transform)
    train_loader = torch.utils.data.DataLoader(train, batch_size=16, shuffle=True)
    test_loader = torch.utils.data.DataLoader(test, batch_size=50)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(2):
        for step, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.6f}")
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            correct += (model(data).argmax(1) == target).sum().item()
    print(f"test correct {correct}/{len(test)}")
    print("loader", type(train_loader).__module__)
""")

IMAGENET_SCRIPT = textwrap.dedent("""
    import argparse
    import os
    import torch
    import torch.nn as nn
    import torchvision.datasets as datasets
    import torchvision.transforms as transforms

    def accuracy(output, target):
        return (output.argmax(1) == target).float().sum().item()

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("data")
        parser.add_argument("-j", "--workers", type=int, default=2)
        args = parser.parse_args()
        torch.manual_seed(0)
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406],
                                         std=[0.229, 0.224, 0.225])
        train_dataset = datasets.ImageFolder(os.path.join(args.data, "train"),
            transforms.Compose([transforms.RandomResizedCrop(32),
                                transforms.RandomHorizontalFlip(),
                                transforms.ToTensor(), normalize]))
        val_dataset = datasets.ImageFolder(os.path.join(args.data, "val"),
            transforms.Compose([transforms.Resize(36), transforms.CenterCrop(32),
                                transforms.ToTensor(), normalize]))
        train_loader = torch.utils.data.DataLoader(
            train_dataset, batch_size=8, shuffle=True, num_workers=args.workers,
            pin_memory=True, sampler=None)
        val_loader = torch.utils.data.DataLoader(
            val_dataset, batch_size=8, shuffle=False, num_workers=args.workers,
            pin_memory=True)
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(8, 3))
        device = torch.device("cpu")
        seen = 0
        for images, target in train_loader:
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            seen += images.shape[0]
        print(f"train samples {seen}")
        model.eval()
        correct, total = 0.0, 0
        with torch.no_grad():
            for images, target in val_loader:
                correct += accuracy(model(images.to(device, non_blocking=True)), target)
                total += target.shape[0]
        print(f"val top1 {correct / total:.6f} of {total}")

    if __name__ == "__main__":
        main()
""")


def environment(*extra):
    """os.environ with PYTHONPATH made absolute (the scripts run elsewhere)."""
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([*extra, *paths]))


def run(args, cwd, swap):
    command = [sys.executable] + (["-m", "ringloader"] if swap else []) + args
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=environment())
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_mnist_example_pattern_trains_identically(tmp_path):
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, count in (("train", 96), ("t10k", 100)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte",
                  rng.integers(0, 256, size=(count, 28, 28)))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, size=count))
    script = tmp_path / "main.py"
    script.write_text(MNIST_SCRIPT)
    args = [str(script), "--root", str(tmp_path / "data")]
    theirs, _ = run(args, tmp_path, swap=False)
    ours, err = run(args, tmp_path, swap=True)
    assert "loader torch.utils.data.dataloader" in theirs
    assert "loader ringloader.dataloader" in ours
    assert "runs in Python workers" not in err
    # Same order (torch's RandomSampler, same seed), same pixels, same
    # model: every printed loss is the same.
    assert theirs.splitlines()[:-1] == ours.splitlines()[:-1]


def test_imagenet_example_pattern_gives_the_same_validation(tmp_path):
    write_image_folder(str(tmp_path / "data" / "train"), classes=3, per_class=8,
                       ext="jpg", seed=5)
    write_image_folder(str(tmp_path / "data" / "val"), classes=3, per_class=5,
                       ext="jpg", seed=6)
    script = tmp_path / "main.py"
    script.write_text(IMAGENET_SCRIPT)
    args = [str(script), str(tmp_path / "data"), "-j", "2"]
    theirs, _ = run(args, tmp_path, swap=False)
    ours, err = run(args, tmp_path, swap=True)
    assert "runs in Python workers" not in err
    assert theirs == ours  # every training sample seen; the same val accuracy


@pytest.mark.parametrize("how", ["no-arguments", "module"])
def test_launcher_usage(how, tmp_path):
    if how == "no-arguments":
        done = subprocess.run([sys.executable, "-m", "ringloader"], capture_output=True,
                              text=True, timeout=60, env=environment())
        assert done.returncode == 2 and "usage" in done.stderr
    else:
        package = tmp_path / "pkg"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "train.py").write_text(
            "import sys, torch.utils.data\n"
            "print(torch.utils.data.DataLoader.__module__, sys.argv[1:])\n")
        done = subprocess.run([sys.executable, "-m", "ringloader", "-m", "pkg.train", "x"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              env=environment(str(tmp_path)))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ringloader.dataloader ['x']"


def test_script_imports_from_its_folder_not_the_working_directory(tmp_path):
    """sys.path as `python script.py` gives it: a module in the working
    directory (here one that would shadow a library) is not importable."""
    scripts, cwd = tmp_path / "scripts", tmp_path / "cwd"
    scripts.mkdir()
    cwd.mkdir()
    (cwd / "shadowing.py").write_text("")
    (scripts / "beside.py").write_text("")
    (scripts / "main.py").write_text(
        "import importlib.util, os, sys\n"
        "print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)),\n"
        "      os.getcwd() in sys.path,\n"
        "      importlib.util.find_spec('beside') is not None,\n"
        "      importlib.util.find_spec('shadowing') is not None)\n")
    theirs, _ = run([str(scripts / "main.py")], cwd, swap=False)
    ours, _ = run([str(scripts / "main.py")], cwd, swap=True)
    assert theirs == "True False True False\n"
    assert ours == theirs


@pytest.mark.parametrize("freeze", ["default", "0"])
def test_the_launcher_freezes_only_what_was_imported_before_the_script(tmp_path, freeze):
    """gc.freeze before the script runs (unless RINGLOADER_GC_FREEZE=0):
    the script's own objects stay collectable."""
    (tmp_path / "main.py").write_text(
        "import gc\n"
        "frozen = gc.get_freeze_count()\n"
        "class Node: pass\n"
        "a, b = Node(), Node()\n"
        "a.other, b.other = b, a\n"
        "del a, b\n"
        "print(frozen > 1000, gc.collect() >= 2, gc.get_freeze_count() == frozen)\n")
    env = environment()
    if freeze == "0":
        env["RINGLOADER_GC_FREEZE"] = "0"
    done = subprocess.run([sys.executable, "-m", "ringloader", str(tmp_path / "main.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("True True True\n" if freeze == "default" else "False True True\n")


SPAWNING_SCRIPT = textwrap.dedent("""
    import multiprocessing
    import sys
    import torch
    import torch.multiprocessing as tmp
    import torch.utils.data

    def which(rank, out):
        loader = torch.utils.data.DataLoader(list(range(8)), batch_size=4, num_workers=2)
        total = sum(int(batch.sum()) for batch in loader)
        with open(f"{out}.{rank}", "w") as f:
            f.write(f"{type(loader).__module__} {total}")

    if __name__ == "__main__":
        out = sys.argv[1]
        tmp.spawn(which, args=(out,), nprocs=2)
        child = multiprocessing.get_context("spawn").Process(target=which, args=(2, out))
        child.start()
        child.join()
        which(3, out)
""")


@pytest.mark.parametrize("swap", [False, True])
def test_spawned_children_use_the_same_loader_as_the_parent(tmp_path, swap):
    """mp.spawn and multiprocessing "spawn" children are fresh interpreters:
    under ``python -m ringloader`` they build ringloader's DataLoader too."""
    script = tmp_path / "spawning.py"
    script.write_text(SPAWNING_SCRIPT)
    out = str(tmp_path / "loader")
    command = [sys.executable, *(["-m", "ringloader"] if swap else []), str(script), out]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=environment())
    assert done.returncode == 0, done.stderr
    expected = "ringloader.dataloader 28" if swap else "torch.utils.data.dataloader 28"
    for rank in range(4):
        assert open(f"{out}.{rank}").read() == expected, rank
