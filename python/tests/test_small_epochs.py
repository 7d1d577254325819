# SPDX-License-Identifier: BSD-3-Clause
"""An epoch smaller than one batch (drop_last off): torch gives one short
batch. ringloader sized its order window as the epoch, under one batch, so
no batch was ever published and the first next() waited forever: what
torchvision's classification reference hit on a small validation folder.
Each case runs in a child process with a time limit, beside torch."""
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import sys, torch, ringloader
    from torch.utils.data import TensorDataset, DataLoader
    kind, n, batch, workers = sys.argv[1], *map(int, sys.argv[2:5])

    class Squares(torch.utils.data.Dataset):
        def __len__(self): return n
        def __getitem__(self, i): return torch.full((3,), float(i * i)), i

    def dataset():
        if kind == "tensors":
            return TensorDataset(torch.arange(n * 2.0).reshape(n, 2), torch.arange(n))
        if kind == "python":
            return Squares()
        import torchvision
        from torchvision import transforms as T
        return torchvision.datasets.ImageFolder(sys.argv[5], T.Compose(
            [T.Resize(20), T.CenterCrop(16), T.PILToTensor(), T.ConvertImageDtype(torch.float)]))

    def batches(cls, **extra):
        return list(cls(dataset(), batch_size=batch, num_workers=workers, **extra))

    ours, torchs = batches(ringloader.DataLoader), batches(DataLoader)
    assert len(ours) == len(torchs), (len(ours), len(torchs))
    for mine, theirs in zip(ours, torchs):
        for a, b in zip(mine, theirs):
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape)
            # Decoded and resized pixels: the native ops' 1-LSB parity.
            limit = 1 / 255 + 1e-6 if a.is_floating_point() and kind == "folder" else 0
            assert (a.double() - b.double()).abs().max().item() <= limit
    print(len(ours), [len(b[1]) for b in ours])
""")


@pytest.mark.parametrize("kind", ["tensors", "python", "folder"])
@pytest.mark.parametrize("n,batch,workers", [(5, 64, 2), (63, 64, 1), (1, 4, 2)])
def test_an_epoch_smaller_than_a_batch_gives_torchs_one_short_batch(
        tmp_path, kind, n, batch, workers):
    folder = tmp_path / "images"
    if kind == "folder":
        from conftest import write_image_folder
        write_image_folder(str(folder), classes=1, per_class=n, ext="png")
    child = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(batch), str(workers),
                            str(folder)], capture_output=True, text=True, timeout=90)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.split()[0] == "1", child.stdout
