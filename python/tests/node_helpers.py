# SPDX-License-Identifier: BSD-3-Clause
"""What the node loader tests share: datasets, a trainer process, the
reference a plain DataLoader over the node's order gives."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torchvision.transforms as T

import ringloader

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _name(what):
    return f"pytest-{what}-{os.getpid()}"


def _dataset(folder):
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    return ringloader.datasets.ImageFolder(folder, transform)


def _python(code, **env):
    """A Python process with this test's ringloader on its path."""
    environment = dict(os.environ, PYTHONUNBUFFERED="1",
                       **{k: str(v) for k, v in env.items()})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


TRAINER = """
    import json, sys, torch, ringloader
    loader = ringloader.DataLoader(attach="{name}")
    out = []
    for epoch in range({epochs}):
        loader.set_epoch(epoch)
        for images, labels in loader:
            {consume}
            out.append([epoch, float(images.double().sum()), labels.tolist()])
    print(json.dumps({{"device": loader.device, "batches": out}}))
"""


def _reference(folder, order_of, epochs, batch_size):
    """Per epoch, the batches a plain DataLoader makes over the node's order."""
    expected = []
    for epoch in range(epochs):
        order = order_of(epoch)
        loader = ringloader.DataLoader(_dataset(folder), batch_size=batch_size,
                                       sampler=order, seed=7)
        loader.set_epoch(epoch)
        expected.append([(float(x.double().sum()), y.tolist()) for x, y in loader])
    return expected


def _node_order(size, trainers, batch_size, epoch, seed=7):
    options = {"shuffle": True, "seed": seed, "batch_size": batch_size, "rank": 0,
               "world_size": 1}
    order = ringloader._ringloader.epoch_order(size, options, epoch)
    round_ = trainers * batch_size
    wanted = (size + round_ - 1) // round_ * round_
    return [order[i % size] for i in range(wanted)]


def _run_trainers(name, trainers, epochs, consume="pass"):
    procs = [_python(TRAINER.format(name=name, epochs=epochs, consume=consume),
                     LOCAL_RANK=rank) for rank in range(trainers)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _check_split(results, expected, trainers):
    for epoch, batches in enumerate(expected):
        for rank, result in enumerate(results):
            got = [(s, labels) for e, s, labels in result["batches"] if e == epoch]
            mine = batches[rank::trainers]
            assert len(got) == len(mine), (epoch, rank)
            for (s, labels), (want_sum, want_labels) in zip(got, mine):
                assert labels == want_labels
                assert s == pytest.approx(want_sum, rel=1e-6, abs=1e-3)
