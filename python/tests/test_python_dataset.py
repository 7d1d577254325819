# SPDX-License-Identifier: BSD-3-Clause
"""Any map-style Python Dataset: spawned Python workers write samples
straight into the ring; batches match torch's DataLoader."""
import os

import pytest
import torch

import ringloader


class Squares(torch.utils.data.Dataset):
    """(image-like tensor, label, dict) samples with per-sample randomness."""

    def __init__(self, n=37):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        noise = torch.rand(3, 8, 8)  # seeded per sample by ringloader
        x = torch.full((3, 8, 8), float(i)) + noise
        return x, i % 5, {"id": i, "score": i / 2.0}


class Fails(Squares):
    def __getitem__(self, i):
        if i == 11:
            raise KeyError("no such record in /data/records.db")
        return super().__getitem__(i)


class Ragged(Squares):
    def __getitem__(self, i):
        return torch.zeros(3, 8 if i != 6 else 9), i


def test_batches_match_torch_collate_and_order():
    ours = ringloader.DataLoader(Squares(), batch_size=6, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(2))
    theirs = torch.utils.data.DataLoader(Squares(), batch_size=6, shuffle=True,
                                         generator=torch.Generator().manual_seed(2))
    assert len(ours) == len(theirs) == 7
    for (x, y, meta), (tx, ty, tmeta) in zip(ours, theirs):
        assert x.shape == tx.shape and x.dtype == tx.dtype
        assert torch.equal(x.floor(), tx.floor())  # same samples, own noise
        assert torch.equal(y, ty) and y.dtype == torch.int64
        assert torch.equal(meta["id"], tmeta["id"])
        assert torch.equal(meta["score"], tmeta["score"])


def test_two_and_four_workers_give_identical_bytes():
    runs = []
    for workers in (2, 4):
        loader = ringloader.DataLoader(Squares(), batch_size=5, shuffle=True,
                                       num_workers=workers, seed=3,
                                       generator=torch.Generator().manual_seed(1))
        runs.append([x.clone() for x, _, _ in loader])
    assert len(runs[0]) == 8
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_worker_exception_names_sample_and_keeps_traceback():
    loader = ringloader.DataLoader(Fails(), batch_size=4, num_workers=2)
    with pytest.raises(KeyError) as info:  # its own type, as with torch
        for _ in loader:
            pass
    message = str(info.value)
    assert "sample 11" in message
    assert "records.db" in message and "KeyError" in message
    assert "batch 2" in message


def test_shape_mismatch_is_named():
    loader = ringloader.DataLoader(Ragged(), batch_size=4, num_workers=1)
    with pytest.raises(ringloader.WorkerError, match="sample 6"):
        for _ in loader:
            pass


def test_custom_collate_and_workers_are_spawned_not_forked():
    seen = []

    def collate(samples):
        seen.append(len(samples))
        return torch.stack([s[0] for s in samples])

    loader = ringloader.DataLoader(Squares(10), batch_size=4, num_workers=2,
                                   collate_fn=collate)
    batches = list(loader)
    # The collate ran in the workers, as torch's does: the trainer's list
    # stays empty (it did hold [4, 4, 2] when collates ran in the trainer).
    assert [b.shape[0] for b in batches] == [4, 4, 2] and seen == []
    list(torch.utils.data.DataLoader(Squares(10), batch_size=4, num_workers=2,
                                     collate_fn=collate))
    assert seen == []
    for pid in loader.worker_pids():
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            # The trainer's child is the stub; the worker is forked from
            # the clean zygote's loader server (test_worker_start.py).
            assert f.read().split(b"\0")[0].endswith(b"/ringloader-python-stub")


def test_a_missing_stub_is_refused_before_any_server_starts(monkeypatch, tmp_path):
    from ringloader._trainer import python_workers as _python_workers
    monkeypatch.setattr(_python_workers, "_STUB", str(tmp_path / "ringloader-python-stub"))
    forks = []
    from ringloader._trainer import zygote_process as _zygote_process
    monkeypatch.setattr(_zygote_process._Zygote, "fork_server",
                        lambda *args: forks.append(args))
    with pytest.raises(ringloader.OptionError, match="ringloader-python-stub"):
        list(ringloader.DataLoader(Squares(4), batch_size=2, num_workers=2))
    assert forks == []


def test_num_workers_zero_runs_in_process_like_torch():
    ours = list(ringloader.DataLoader(Squares(9), batch_size=4))
    assert [x.shape[0] for x, _, _ in ours] == [4, 4, 1]
