# SPDX-License-Identifier: BSD-3-Clause
"""Writes what users saved with ringloader before issue 44 moved its
private modules into sub-packages and datasets.py into a package (run with
the package of commit bf9a26a on PYTHONPATH; test_saved_before_layout.py
loads both files with today's):

- pickled_before_layout.pkl: a transform pipeline, a transform class defined
  in a private module, objects of classes whose modules moved, an IdxDataset;
- saved_before_layout.pt: a DataLoader state_dict taken in the middle of an
  epoch, with the batches that followed it.

    git archive bf9a26a python/ringloader | tar -x -C /tmp/old
    cp build/python/ringloader/_ringloader*.so build/python/ringloader/_build_info.py \\
       /tmp/old/python/ringloader/
    PYTHONPATH=/tmp/old/python python3 python/tests/data/make_saved_before_layout.py DIR
"""
import os
import pickle
import sys
import tempfile

import torch

import ringloader
from ringloader import transforms as T

IDX_COUNT = 5


def rows():
    return torch.utils.data.TensorDataset(torch.arange(72.).view(24, 3), torch.arange(24))


def loader():
    return ringloader.DataLoader(rows(), batch_size=5, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(7))


def pipeline():
    return T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])


def write_idx(folder):
    """A 5-image IDX pair (2x3 pixels): MNIST's format, no gzip."""
    images, labels = os.path.join(folder, "images.idx"), os.path.join(folder, "labels.idx")
    with open(images, "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (IDX_COUNT, 2, 3)))
        f.write(bytes(range(IDX_COUNT * 6)))
    with open(labels, "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + IDX_COUNT.to_bytes(4, "big") + bytes(range(IDX_COUNT)))
    return images, labels


def pickles(out):
    from ringloader import _batch_codec, _batch_structure, _iterable_worker
    with tempfile.TemporaryDirectory() as folder:
        idx = ringloader.datasets.IdxDataset(*write_idx(folder))
        saved = {"transform": pickle.dumps(pipeline()), "transform_repr": repr(pipeline()),
                 # defined in a private module (ringloader._convert_autoaugment)
                 "autoaugment": pickle.dumps(T.AutoAugment()),
                 # classes whose modules moved (slot formats, workers)
                 "private": pickle.dumps([_batch_structure.Reshaped((2, 3)), _iterable_worker.END,
                                          _batch_codec.TooBig(10, 4)]),
                 "idx": pickle.dumps(idx)}
    with open(out, "wb") as f:
        pickle.dump(saved, f)


def state(out):
    first = loader()
    list(first)  # epoch 0
    iterator = iter(first)
    for _ in range(2):  # 2 of epoch 1's 5 batches
        next(iterator)
    state = first.state_dict()
    torch.save({"state": state, "rest": list(iterator)}, out)


if __name__ == "__main__":
    pickles(os.path.join(sys.argv[1], "pickled_before_layout.pkl"))
    state(os.path.join(sys.argv[1], "saved_before_layout.pt"))
