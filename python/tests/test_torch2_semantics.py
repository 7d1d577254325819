# SPDX-License-Identifier: BSD-3-Clause
"""torch 2.x's DataLoader arguments and behaviours, beside torch's own
loader (issue 26). Each test also runs under Debian's torch 1.13, where the
torch side of a comparison it lacks is skipped."""
import inspect
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader

import ringloader


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.tensor([i, i * i]), i


def _torch_takes(name):
    return name in inspect.signature(TorchLoader.__init__).parameters


@pytest.mark.parametrize("in_order", [True, False])
def test_in_order_is_accepted_and_batches_come_in_sampler_order(in_order):
    # torch >= 2.6 takes in_order; False lets batches come as workers finish,
    # and the sampler's order is one of those orders: ringloader's always.
    loader = ringloader.DataLoader(Squares(), batch_size=4, num_workers=2,
                                   in_order=in_order)
    assert loader.in_order is in_order
    ours = [y.tolist() for _, y in loader]
    assert ours == [list(range(i, i + 4)) for i in range(0, 24, 4)]
    if _torch_takes("in_order"):
        theirs = [y.tolist() for _, y in TorchLoader(Squares(), batch_size=4,
                                                        num_workers=2, in_order=in_order)]
        assert sorted(theirs) == sorted(ours)


def test_every_argument_of_torchs_dataloader_is_accepted():
    # A script written for the running torch passes any of them.
    ours = inspect.signature(ringloader.DataLoader.__init__).parameters
    missing = [name for name in inspect.signature(TorchLoader.__init__).parameters
               if name not in ours]
    assert missing == []


def test_pin_memory_device_is_accepted_like_torch():
    loader = ringloader.DataLoader(Squares(), batch_size=4, pin_memory_device="")
    assert loader.pin_memory_device == ""
    assert len(list(loader)) == 6


def test_python_workers_start_without_forking_a_threaded_trainer(tmp_path):
    # Python >= 3.12 warns (DeprecationWarning) when a multi-threaded process
    # forks, as torch's fork-started workers do once the trainer runs
    # threads. ringloader's workers come from a zygote made while the
    # process is one thread: no warning, even with threads running.
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent("""
        import threading, time, warnings
        warnings.simplefilter("error", DeprecationWarning)
        import torch, ringloader
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        class Data(torch.utils.data.Dataset):
            def __len__(self): return 16
            def __getitem__(self, i): return torch.full((3,), float(i))
        for context in (None, "fork", "spawn"):
            loader = ringloader.DataLoader(Data(), batch_size=4, num_workers=2,
                                           multiprocessing_context=context)
            assert sum(float(b.sum()) for b in loader) == 3 * sum(range(16))
        stop.set()
        print("OK")
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0 and result.stdout.strip() == "OK", result.stderr
    assert "DeprecationWarning" not in result.stderr


def test_generator_seeds_shuffle_like_torch():
    # The same generator seed gives torch's sampler order (Python datasets
    # use torch's RandomSampler).
    def order(loader_class, **extra):
        generator = torch.Generator().manual_seed(1234)
        loader = loader_class(Squares(), batch_size=4, shuffle=True, generator=generator,
                              **extra)
        return [y.tolist() for _, y in loader]
    assert order(ringloader.DataLoader, num_workers=2) == order(TorchLoader)


class Counting(torch.utils.data.IterableDataset):
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 24, step))


@pytest.mark.parametrize("dataset", [Squares, Counting])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("given", [{}, {"prefetch_factor": 2}, {"prefetch_factor": 4},
                                   {"prefetch_factor": -1}])
def test_prefetch_factor_reads_back_and_is_checked_like_the_installed_torch(
        num_workers, given, dataset):
    # torch 1.13: default 2, read back 2 (2 also passes without workers);
    # torch 2.x: default None, read back 2 with workers. Whatever the
    # installed torch accepts, ours accepts and reads back the same; what it
    # refuses, ours refuses as a ValueError.
    try:
        theirs = TorchLoader(dataset(), batch_size=4, num_workers=num_workers, **given)
    except (ValueError, AssertionError, TypeError):
        theirs = None
    if theirs is None:
        with pytest.raises(ValueError):
            ringloader.DataLoader(dataset(), batch_size=4, num_workers=num_workers, **given)
        return
    ours = ringloader.DataLoader(dataset(), batch_size=4, num_workers=num_workers, **given)
    assert ours.prefetch_factor == theirs.prefetch_factor, torch.__version__
    if dataset is Squares:
        assert [y.tolist() for _, y in ours] == [y.tolist() for _, y in theirs]
    else:  # workers interleave their batches; the same batches either way
        assert sorted(b.tolist() for b in ours) == sorted(b.tolist() for b in theirs)


@pytest.mark.parametrize("num_workers,given,slots", [
    (2, {}, 4), (3, {}, 6),                    # automatic: two per worker, 4 at least
    (2, {"prefetch_factor": 2}, 4),            # torch's default, passed: the same ring
    (2, {"prefetch_factor": 3}, 6), (1, {"prefetch_factor": 1}, 4)])
def test_the_ring_holds_two_batches_per_worker_or_what_prefetch_factor_asks(
        num_workers, given, slots):
    # Every slot stays resident (docs/peers.md, "Ring depth"), so the ring is
    # no deeper than torch's own prefetching unless the caller asks.
    loader = ringloader.DataLoader(Squares(), batch_size=4, num_workers=num_workers, **given)
    assert [y.tolist() for _, y in loader] == [list(range(i, i + 4)) for i in range(0, 24, 4)]
    assert loader.stats()["ring_slots"] == slots
