# SPDX-License-Identifier: BSD-3-Clause
"""No program a worker runs inherits the loader's descriptors: a dataset
that shells out (os.system keeps every inheritable fd) must not find the
ring's memfd there, or the ring would outlive its workers."""
import glob
import os

import torch

import ringloader


class ShellsOut(torch.utils.data.Dataset):
    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return 8

    def __getitem__(self, i):
        os.system(f"ls -l /proc/self/fd > {self.folder}/{i}.txt 2>&1")
        return torch.full((2,), float(i)), i


def test_commands_run_by_python_workers_hold_no_loader_memfd(tmp_path):
    dataset = ShellsOut(str(tmp_path))
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=4))
    # Ours second: each listing is then a ringloader worker's.
    ours = [(x.clone(), y.clone()) for x, y in
            ringloader.DataLoader(dataset, batch_size=4, num_workers=2)]
    assert len(ours) == len(theirs) == 2
    for (x, y), (rx, ry) in zip(ours, theirs):
        assert torch.equal(x, rx) and torch.equal(y, ry)
    listings = glob.glob(str(tmp_path / "*.txt"))
    assert len(listings) == 8
    for path in listings:
        text = open(path).read()
        assert "memfd:ringloader" not in text, text
