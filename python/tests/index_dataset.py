# SPDX-License-Identifier: BSD-3-Clause
"""A Python map-style dataset whose sample i is (a tensor of i, i): the
rank scripts of the gloo jobs read which samples each rank got from it."""
import torch


class IndexDataset(torch.utils.data.Dataset):
    def __init__(self, size, width=4):
        self.size = size
        self.width = width

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return torch.full((self.width,), float(index)), index
