# SPDX-License-Identifier: BSD-3-Clause
"""Unchanged training scripts whose samples change size (issue 32, item 4),
run once with torch's DataLoader and once under ``python -m ringloader``:

- torchvision 0.14.1's references/detection/train.py itself, on a tiny
  COCO-format set made from photos (bench/make_coco_folder.py), when the
  references and pycocotools are on this machine
  (scripts/get_real_scripts.sh); skipped, saying so, otherwise;
- our smoke versions of the two data paths, always: the detection
  reference's (images at native size, dict targets with a variable number
  of boxes, ``collate_fn=lambda b: tuple(zip(*b))``, evaluation at
  ``batch_size=1``) and a token-sequence classifier's (lengths 5..300,
  ``pad_sequence`` collate, batch 8, then ``batch_size=1`` with the default
  collate).

The photos are mirror-symmetric, boxes too, so the references' default
RandomHorizontalFlip changes nothing: torch draws the flips in its workers
from the worker seed, ringloader per sample, and with such data neither
draw shows in the losses, which must then be the same line for line.
The model's rounding depends on the images' strides (pil_to_tensor's is an
HWC buffer seen as CHW), so ringloader hands tensors over with the strides
the worker made, as torch does (test_custom_collate_keeps_tensor_strides).
"""
import os
import shutil
import sys
import textwrap

import pytest

from unchanged_scripts_variable import (NCE_COMMIT, REPORTING, SEEDED,
                                        detection_lines, nce_dependencies, nce_log_lines, pycocotools_path,
                                        pytorch_nce, run, torchvision_references)

SOURCE = os.environ.get("RINGLOADER_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def make_coco(root, train, val):
    sys.path.insert(0, os.path.join(SOURCE, "bench"))
    try:
        from make_coco_folder import make
    finally:
        sys.path.pop(0)
    make(str(root), train=train, val=val, min_side=64, max_side=160, max_boxes=4, mirror=True)
    return str(root)


def test_torchvision_detection_reference_trains_identically(tmp_path):
    references = torchvision_references()
    if references is None:
        pytest.skip("torchvision 0.14.1 references not on this machine "
                    "(scripts/get_real_scripts.sh fetches them)")
    cocotools = pycocotools_path()
    if cocotools is None:
        pytest.skip("pycocotools not installed (scripts/get_real_scripts.sh "
                    "installs it from PyPI)")
    make_coco(tmp_path / "coco", train=6, val=2)
    # Unchanged but seeded; before strides were kept, the lines differed
    # from the 2nd step's 4th decimal on.
    (tmp_path / "seeded.py").write_text(SEEDED)
    args = ["seeded.py", os.path.join(references, "detection", "train.py"),
            "--data-path", "coco", "--model", "ssdlite320_mobilenet_v3_large",
            "--device", "cpu", "--epochs", "1", "-b", "2", "--workers", "2",
            "--print-freq", "1", "--lr", "0.01", "--output-dir", "out"]
    theirs, _ = run(args, tmp_path, swap=False, extra_path=[cocotools])
    ours, _ = run(args, tmp_path, swap=True, extra_path=[cocotools])
    expected = detection_lines(theirs)
    assert sum(line.startswith("Epoch: [0]") for line in expected) == 3, theirs
    assert detection_lines(ours) == expected


DETECTION_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.nn as nn
    import torch.utils.data
    from PIL import Image
    from torchvision.transforms import functional as F

    class Coco(torch.utils.data.Dataset):
        def __init__(self, root, split, train):
            with open(os.path.join(root, "annotations", f"instances_{split}2017.json")) as f:
                coco = json.load(f)
            self.folder, self.train = os.path.join(root, f"{split}2017"), train
            self.images = coco["images"]
            self.annotations = {}
            for a in coco["annotations"]:
                self.annotations.setdefault(a["image_id"], []).append(a)

        def __len__(self):
            return len(self.images)

        def __getitem__(self, index):
            info = self.images[index]
            image = Image.open(os.path.join(self.folder, info["file_name"])).convert("RGB")
            anno = self.annotations[info["id"]]
            boxes = torch.as_tensor([a["bbox"] for a in anno], dtype=torch.float32).reshape(-1, 4)
            boxes[:, 2:] += boxes[:, :2]
            target = {"boxes": boxes,
                      "labels": torch.tensor([a["category_id"] for a in anno]),
                      "image_id": torch.tensor([info["id"]]),
                      "area": torch.tensor([a["area"] for a in anno]),
                      "iscrowd": torch.tensor([a["iscrowd"] for a in anno])}
            if self.train and torch.rand(1) < 0.5:
                image = F.hflip(image)
                target["boxes"][:, [0, 2]] = image.width - target["boxes"][:, [2, 0]]
            return F.convert_image_dtype(F.pil_to_tensor(image), torch.float), target

    def collate_fn(batch):
        return tuple(zip(*batch))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(),
                                          nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.head = nn.Linear(8, 5)

        def forward(self, images, targets):
            losses = []
            for image, target in zip(images, targets):
                out = self.head(self.features(image[None]))[0]
                h, w = image.shape[1:]
                boxes = target["boxes"] / torch.tensor([w, h, w, h])
                wanted = torch.cat([boxes.mean(0), torch.tensor([float(len(boxes))])])
                losses.append(((out - wanted) ** 2).mean())
            return torch.stack(losses).mean()

    root = sys.argv[1]
    torch.manual_seed(0)
    dataset = Coco(root, "train", train=True)
    sampler = torch.utils.data.RandomSampler(dataset)
    batches = torch.utils.data.BatchSampler(sampler, 2, drop_last=True)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=batches, num_workers=2,
                                         collate_fn=collate_fn)
    test_loader = torch.utils.data.DataLoader(Coco(root, "val", train=False), batch_size=1,
                                              sampler=None, num_workers=2,
                                              collate_fn=collate_fn)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for step, (images, targets) in enumerate(loader):
            images = list(image.to("cpu") for image in images)
            targets = [{k: v.to("cpu") for k, v in t.items()} for t in targets]
            loss = model(images, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            shapes = " ".join("x".join(map(str, i.shape[1:])) for i in images)
            print(f"epoch {epoch} step {step} images {shapes} "
                  f"boxes {[len(t['boxes']) for t in targets]} loss {loss.item():.6f}")
    with torch.inference_mode():
        for images, targets in test_loader:
            print("test", targets[0]["image_id"].item(), tuple(images[0].shape),
                  f"{model(images, targets).item():.6f}")
    print("loader", type(loader).__module__)
""")


def test_detection_reference_pattern_trains_identically(tmp_path):
    root = make_coco(tmp_path / "coco", train=12, val=3)
    (tmp_path / "train.py").write_text(DETECTION_SCRIPT)
    theirs, _ = run(["train.py", root], tmp_path, swap=False)
    ours, err = run(["train.py", root], tmp_path, swap=True)
    assert theirs.splitlines()[-1] == "loader torch.utils.data.dataloader"
    assert ours.splitlines()[-1] == "loader ringloader.dataloader"
    assert len(set(line.split(" boxes")[0].split("images ")[1]
                   for line in theirs.splitlines() if line.startswith("epoch"))) > 1
    assert theirs.splitlines()[:-1] == ours.splitlines()[:-1]


TOKENS_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn as nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
    from torch.utils.data import DataLoader, Dataset

    class Lines(Dataset):
        def __init__(self, path):
            with open(path) as f:
                rows = [line.split("\\t") for line in f.read().splitlines()]
            words = sorted({w for _, text in rows for w in text.split()})
            self.vocab = {w: i + 1 for i, w in enumerate(words)}
            self.rows = [(int(label), text.split()) for label, text in rows]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, index):
            label, words = self.rows[index]
            return torch.tensor([self.vocab[w] for w in words]), label

    def pad_collate(batch):
        tokens, labels = zip(*batch)
        lengths = torch.tensor([len(t) for t in tokens])
        return pad_sequence(tokens, batch_first=True), lengths, torch.tensor(labels)

    class Classifier(nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.embedding = nn.Embedding(vocab + 1, 16, padding_idx=0)
            self.gru = nn.GRU(16, 16, batch_first=True)
            self.out = nn.Linear(16, 3)

        def forward(self, tokens, lengths):
            packed = pack_padded_sequence(self.embedding(tokens), lengths,
                                          batch_first=True, enforce_sorted=False)
            return self.out(self.gru(packed)[1][-1])

    torch.manual_seed(0)
    dataset = Lines(sys.argv[1])
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2,
                        collate_fn=pad_collate)
    model = Classifier(len(dataset.vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(2):
        for step, (tokens, lengths, labels) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(tokens, lengths), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step} padded {tuple(tokens.shape)} loss {loss.item():.6f}")
    correct = 0
    with torch.no_grad():
        for tokens, label in DataLoader(dataset, batch_size=1, num_workers=2):
            correct += int(model(tokens, torch.tensor([tokens.shape[1]])).argmax(1) == label)
    print(f"correct {correct}/{len(dataset)}")
    print("loader", type(loader).__module__)
""")


def write_lines(path, count=48, seed=0):
    import random
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(200)]
    with open(path, "w") as f:
        for _ in range(count):
            label = rng.randrange(3)
            text = " ".join(rng.choice(words[label * 60:label * 60 + 80])
                            for _ in range(rng.randint(5, 300)))
            f.write(f"{label}\t{text}\n")
    return str(path)


def test_token_sequence_pattern_trains_identically(tmp_path):
    data = write_lines(tmp_path / "lines.tsv")
    (tmp_path / "train.py").write_text(TOKENS_SCRIPT)
    theirs, _ = run(["train.py", data], tmp_path, swap=False)
    ours, _ = run(["train.py", data], tmp_path, swap=True)
    assert theirs.splitlines()[-1] == "loader torch.utils.data.dataloader"
    assert ours.splitlines()[-1] == "loader ringloader.dataloader"
    assert theirs.splitlines()[:-1] == ours.splitlines()[:-1]


def test_pytorch_nce_language_model_trains_identically(tmp_path):
    """Stonesjtu/Pytorch-NCE's example/main.py: PTB sentences of 2..70 words,
    ``pad_sequence`` in its collate, shuffled, in process (its num_workers
    is commented out). Its data module imports the class as
    ``from torch.utils.data.dataloader import DataLoader``."""
    root = pytorch_nce()
    if root is None:
        pytest.skip(f"Stonesjtu/Pytorch-NCE@{NCE_COMMIT[:7]} not checked out at "
                    "~/.cache/ringloader/src/pytorch-nce (on no package registry)")
    dependencies = nce_dependencies()
    if dependencies is None:
        pytest.skip("tqdm and dill not installed (scripts/get_real_scripts.sh "
                    "installs them from PyPI)")
    with open(os.path.join(root, "example", "data", "penn", "valid.txt")) as f:
        sentences = f.read().splitlines(True)
    outputs = {}
    for swap in (False, True):
        work = tmp_path / ("ringloader" if swap else "torch")
        shutil.copytree(os.path.join(root, "example"), work,
                        ignore=shutil.ignore_patterns("data", "log", "saved_model"))
        for folder in ("log", "saved_model", "data"):
            (work / folder).mkdir()
        # 1010 sentences: NCE's AliasMultinomial asserts that its float32
        # noise distribution sums to 1 within 1e-9, which holds for this
        # cut's vocabulary (not for every cut).
        (work / "data" / "train.txt").write_text("".join(sentences[:1010]))
        (work / "data" / "valid.txt").write_text("".join(sentences[1010:1210]))
        (work / "data" / "test.txt").write_text("".join(sentences[1210:1310]))
        (work / "report.py").write_text(REPORTING)
        _, err = run(["report.py", "main.py", "--train", "--data", "data", "--epochs", "1",
                      "--emsize", "32", "--nhid", "32", "--batch-size", "20",
                      "--log-interval", "5", "--save", "run"],
                     work, swap=swap, extra_path=[root, dependencies])
        outputs[swap] = (err, nce_log_lines(work / "log" / "run.log"))
    assert "loader torch.utils.data.dataloader" in outputs[False][0]
    assert "loader ringloader.dataloader" in outputs[True][0]
    losses = [line for line in outputs[False][1] if "| loss" in line]
    assert len(losses) == 10 and "test ppl" in outputs[False][1][-1]
    assert outputs[True][1] == outputs[False][1]


SUBMODULE_IMPORT = textwrap.dedent("""
    import pickle
    import torch.utils.data
    import torch.utils.data.dataloader as module
    from torch.utils.data.dataloader import DataLoader, _DatasetKind
    loader = DataLoader(list(range(10)), batch_size=4)
    print(DataLoader.__module__, module.DataLoader is torch.utils.data.DataLoader,
          [batch.tolist() for batch in loader])
    # torch's own DataLoader keeps working (its __setattr__ reads the name
    # DataLoader in its module), as do torch's other names there.
    Torch = DataLoader.__mro__[1] if DataLoader.__module__ != module.__name__ else DataLoader
    plain = Torch(list(range(4)), batch_size=2)
    plain.extra = 1
    print([batch.tolist() for batch in plain], pickle.loads(pickle.dumps(_DatasetKind)).__name__)
""")


def test_dataloader_imported_from_its_module_is_swapped(tmp_path):
    """``from torch.utils.data.dataloader import DataLoader`` (Pytorch-NCE,
    and many scripts) got torch's loader under ``python -m ringloader``."""
    (tmp_path / "script.py").write_text(SUBMODULE_IMPORT)
    theirs, _ = run(["script.py"], tmp_path, swap=False)
    ours, _ = run(["script.py"], tmp_path, swap=True)
    batches = "[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]"
    assert theirs.splitlines()[0] == f"torch.utils.data.dataloader True {batches}"
    assert ours.splitlines()[0] == f"ringloader.dataloader True {batches}"
    assert theirs.splitlines()[1] == ours.splitlines()[1] == "[[0, 1], [2, 3]] _DatasetKind"


class ChannelsLastView:
    """What PILToTensor gives: an HWC buffer seen as CHW."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        import torch
        return torch.arange(60.).reshape(4, 5, 3).permute(2, 0, 1) + index


def keep_as_list(batch):
    return list(batch)


def test_custom_collate_keeps_tensor_strides():
    import torch
    import ringloader
    strides = {}
    for cls in (torch.utils.data.DataLoader, ringloader.DataLoader):
        batch = next(iter(cls(ChannelsLastView(), batch_size=2, num_workers=2,
                              collate_fn=keep_as_list)))
        strides[cls] = [t.stride() for t in batch]
    assert strides[torch.utils.data.DataLoader] == [(1, 15, 3)] * 2
    assert strides[ringloader.DataLoader] == strides[torch.utils.data.DataLoader]
