# SPDX-License-Identifier: BSD-3-Clause
"""Writes saved_before_layout.pt: what users saved with ringloader before
issue 44 moved its private modules into sub-packages (run with the package of
commit bf9a26a on PYTHONPATH; test_saved_before_layout.py loads it with
today's). Kept so the fixture can be made again from any older tree:

    git archive bf9a26a python/ringloader | tar -x -C /tmp/old
    cp build/python/ringloader/_ringloader*.so build/python/ringloader/_build_info.py \\
       /tmp/old/python/ringloader/
    PYTHONPATH=/tmp/old/python python3 python/tests/data/make_saved_before_layout.py OUT
"""
import pickle
import sys

import torch

import ringloader
from ringloader import transforms as T


def rows():
    return torch.utils.data.TensorDataset(torch.arange(72.).view(24, 3), torch.arange(24))


def loader():
    return ringloader.DataLoader(rows(), batch_size=5, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(7))


def main(out):
    first = loader()
    list(first)  # epoch 0
    iterator = iter(first)
    head = [next(iterator) for _ in range(2)]  # 2 of epoch 1's 5 batches
    state = first.state_dict()
    rest = [batch for batch in iterator]
    del head
    pipeline = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    # Objects of classes whose modules moved (the slot formats and workers).
    from ringloader import _batch_codec, _batch_structure, _iterable_worker
    private = pickle.dumps([_batch_structure.Reshaped((2, 3)), _iterable_worker.END,
                            _batch_codec.TooBig(10, 4)])
    torch.save({"state": state, "rest": rest, "transform": pickle.dumps(pipeline),
                "transform_repr": repr(pipeline), "private": private,
                "made_by": ringloader.__file__}, out)


if __name__ == "__main__":
    main(sys.argv[1])
