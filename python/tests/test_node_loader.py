# SPDX-License-Identifier: BSD-3-Clause
"""The node loader across processes (issue 17, part 2): trainer processes
attach by name and split each epoch byte for byte as a plain DataLoader over
the node's order makes it; a killed trainer gives its lane back; a killed
node makes the trainer's next batch raise NodeError at once. The CUDA IPC
lanes' tests are in test_node_cuda.py."""
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
from node_helpers import (gpu, _name, _dataset, _python, TRAINER, _reference, _node_order, _run_trainers, _check_split)  # noqa: F401


@pytest.mark.parametrize("trainers", [1, 2])
def test_trainer_processes_split_each_epoch_byte_for_byte(image_folder, trainers):
    name = _name(f"split{trainers}")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True,
                               num_workers=2, trainers=trainers, name=name, seed=7,
                               epochs=2, lane_slots=2) as node:
        node.start()
        results = _run_trainers(name, trainers, epochs=2)
        stats = node.stats()
    assert stats["attaches"] == trainers
    assert all(r["device"] == "cpu" for r in results)
    expected = _reference(image_folder, lambda e: _node_order(24, trainers, 4, e), 2, 4)
    _check_split(results, expected, trainers)


def test_a_killed_trainer_gives_its_lane_back(image_folder):
    name = _name("killed-trainer")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=2, num_workers=1,
                               name=name, lane_slots=3) as node:
        node.start()
        holder = _python(f"""
            import sys, time, ringloader
            loader = ringloader.DataLoader(attach="{name}")
            batches = iter(loader)
            kept = [next(batches), next(batches)]   # two slots held
            print("holding", flush=True)
            time.sleep(60)
        """)
        assert holder.stdout.readline().strip() == "holding"
        assert node.trainer_pids() == [holder.pid]
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        deadline = time.monotonic() + 10
        while node.trainer_pids() != [0] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert node.trainer_pids() == [0]
        assert node.stats()["reclaimed_slots"] == 2
        # The next trainer goes on with the lane's next batch.
        loader = ringloader.DataLoader(attach=name, trainer=0)
        first = next(iter(loader))
        assert first[0].shape == (2, 3, 24, 24)
        assert len(loader) == 12


def test_a_killed_node_fails_the_trainer_at_once(image_folder):
    name = _name("killed-node")
    node = _python(f"""
        import torchvision.transforms as T, ringloader
        data = ringloader.datasets.ImageFolder({image_folder!r}, T.Compose([T.CenterCrop(16), T.ToTensor()]))
        node = ringloader.NodeLoader(data, batch_size=2, num_workers=1, trainers=2, name="{name}")
        print("serving", flush=True)
        node.serve()
    """)
    try:
        assert node.stdout.readline().strip() == "serving"
        loader = ringloader.DataLoader(attach=name, trainer=0, connect_timeout=30)
        batches = iter(loader)
        next(batches)
        node.send_signal(signal.SIGKILL)
        node.wait()
        started = time.monotonic()
        with pytest.raises(ringloader.NodeError, match="died") as raised:
            for _ in batches:  # lane 1 has no trainer: lane 0 runs dry
                pass
        assert isinstance(raised.value, ConnectionError)
        assert time.monotonic() - started < 5
    finally:
        node.kill()
        node.wait()


def test_no_node_and_wrong_batch_size_are_clear(image_folder):
    with pytest.raises(ringloader.NodeError, match="no node loader"):
        ringloader.DataLoader(attach=_name("absent"), connect_timeout=0.2)
    name = _name("batch")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, name=name):
        with pytest.raises(ringloader.OptionError, match="batch_size=8"):
            ringloader.DataLoader(attach=name, batch_size=8)
        loader = ringloader.DataLoader(attach=name, batch_size=4)
        assert isinstance(loader, ringloader.DataLoader)
        assert isinstance(loader, torch.utils.data.DataLoader)


def test_a_cuda_node_without_a_gpu_is_refused_clearly(image_folder):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ringloader.OptionError, match="GPU|CUDA"):
        ringloader.NodeLoader(_dataset(image_folder), name=_name("nogpu"), device="cuda")


def test_python_datasets_are_refused_by_the_node():
    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.zeros(2), i

    with pytest.raises(ringloader.OptionError, match="runs no Python workers"):
        ringloader.NodeLoader(Numbers(), name=_name("python"))
