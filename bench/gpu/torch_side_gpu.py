# SPDX-License-Identifier: BSD-3-Clause
"""The torch DataLoader side of ringloader-gpu-bench's training-like loop:
same IDX data, batch 256, 2 workers, pin_memory + non_blocking copies, the
same GPU step; prints the trainer's stall per step as JSON."""
import gzip
import json
import sys
import time

import numpy as np
import torch


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class Idx(torch.utils.data.Dataset):
    """What torchvision's MNIST + ToTensor + Normalize do per item."""

    def __init__(self, images, labels):
        self.images, self.labels = read_idx(images), read_idx(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i].copy()).float().div_(255).unsqueeze(0)
        return (x - 0.2860) / 0.3530, int(self.labels[i])


def loop(loader, epochs, weight, work):
    waited, steps, images = 0.0, 0, 0
    begin = time.perf_counter()
    for _ in range(epochs):
        it = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            x = x.cuda(non_blocking=True)
            y = y.cuda(non_blocking=True)
            waited += time.perf_counter() - start
            hidden = x.view(x.shape[0], 784) @ weight
            for _ in range(4):
                hidden = (hidden @ work).tanh_()
            torch.cuda.synchronize()
            steps += 1
            images += x.shape[0]
    wall = time.perf_counter() - begin
    return {"loop_images_per_s": images / wall, "loop_step_ms": 1e3 * wall / steps,
            "loop_stall_ms_per_step": 1e3 * waited / steps, "loop_steps": steps}


def main():
    dataset = Idx(sys.argv[1], sys.argv[2])
    loader = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=True,
                                         num_workers=2, pin_memory=True,
                                         persistent_workers=True)
    weight = torch.randn(784, 4096, device="cuda")
    work = torch.randn(4096, 4096, device="cuda")
    loop(loader, 1, weight, work)
    print(json.dumps(loop(loader, 3, weight, work)))


if __name__ == "__main__":
    main()
