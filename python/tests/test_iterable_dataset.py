# SPDX-License-Identifier: BSD-3-Clause
"""IterableDataset through ringloader.DataLoader, batch for batch against
torch's own loader (issue 32, item 5): sharding with get_worker_info() and
an uneven split, 0/1/3 workers, batch_size None and 4, drop_last,
worker_init_fn, persistent workers, an endless stream, an iterator that
raises, and ``python -m ringloader`` on a script that streams."""
import itertools
import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_collate
from torch.utils.data.dataloader import DataLoader as TorchDataLoader

import ringloader


class Sharded(IterableDataset):
    """Samples start..stop-1, split across workers by get_worker_info():
    worker w takes every num_workers-th from w (uneven when num_workers
    does not divide the count). A sample: (a tensor that varies, its index)."""

    def __init__(self, stop, start=0):
        self.start, self.stop = start, stop

    def __iter__(self):
        info = get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(self.start + first, self.stop, step):
            yield torch.full((3, 2), float(i)), i


class Chunked(IterableDataset):
    """torch's documented pattern: worker_init_fn narrows each worker's copy
    of the dataset to its contiguous chunk."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        return iter(range(self.start, self.stop))


def chunk_per_worker(worker_id):
    info = get_worker_info()
    dataset = info.dataset
    per = -(-(dataset.stop - dataset.start) // info.num_workers)
    dataset.start = dataset.start + worker_id * per
    dataset.stop = min(dataset.start + per, dataset.stop)


class Endless(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        worker = 0 if info is None else info.id
        for i in itertools.count():
            yield {"worker": worker, "i": i, "x": torch.arange(4) + i}


class SeedsAndDraws(IterableDataset):
    """What torch sets per worker: its info, and the seeded generators."""

    def __iter__(self):
        info = get_worker_info()
        for _ in range(3):
            yield torch.tensor([info.id, info.num_workers, info.seed % (1 << 62)]), \
                torch.randint(0, 1 << 30, (2,))


class BrokenStream(Exception):
    pass


class Breaks(IterableDataset):
    """Raises after a few samples in worker 1 (everywhere with no workers)."""

    def __iter__(self):
        info = get_worker_info()
        for i in range(6):
            if i == 3 and (info is None or info.id == 1):
                raise BrokenStream(f"stream broke at {i}")
            yield i


def _batches(loader_class, dataset, epochs=1, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "suggested max workers", our fallback note
        loader = loader_class(dataset, **kwargs)
        return [list(loader) for _ in range(epochs)]


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(
            _equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(
            _equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_same(ours, torchs):
    assert len(ours) == len(torchs)
    for number, (mine, theirs) in enumerate(zip(ours, torchs)):
        assert _equal(mine, theirs), f"batch {number}: {mine!r} != {theirs!r}"


@pytest.mark.parametrize("num_workers", [0, 1, 3])
@pytest.mark.parametrize("batch_size,drop_last", [(None, False), (4, False), (4, True)])
def test_sharded_stream_matches_torch_batch_for_batch(num_workers, batch_size, drop_last):
    # 23 samples over 3 workers: 8, 8 and 7, so batches of 4 leave short
    # ones and worker 2 ends first (torch's round-robin then skips it).
    kwargs = dict(num_workers=num_workers, batch_size=batch_size, drop_last=drop_last)
    ours = _batches(ringloader.DataLoader, Sharded(23), **kwargs)[0]
    torchs = _batches(TorchDataLoader, Sharded(23), **kwargs)[0]
    assert_same(ours, torchs)
    assert len(ours) > 0


def test_batch_size_none_with_drop_last_is_refused_as_torch_does():
    for loader_class in (TorchDataLoader, ringloader.DataLoader):
        with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
            _batches(loader_class, Sharded(4), batch_size=None, drop_last=True,
                     num_workers=2)


def test_workers_that_end_at_different_times_are_skipped_as_torch_does():
    # Worker 0 gets 1..2 samples, worker 2 many: the order must go on with
    # the others once one is exhausted, never stop or repeat.
    ours = _batches(ringloader.DataLoader, Sharded(40, start=30), num_workers=3,
                    batch_size=2)[0]
    assert_same(ours, _batches(TorchDataLoader, Sharded(40, start=30), num_workers=3,
                               batch_size=2)[0])


def test_worker_init_fn_configures_each_workers_copy():
    kwargs = dict(num_workers=3, batch_size=5, worker_init_fn=chunk_per_worker)
    ours = _batches(ringloader.DataLoader, Chunked(3, 30), **kwargs)[0]
    assert_same(ours, _batches(TorchDataLoader, Chunked(3, 30), **kwargs)[0])
    assert sorted(torch.cat(ours).tolist()) == list(range(3, 30))


@pytest.mark.parametrize("persistent", [False, True])
def test_epochs_with_and_without_persistent_workers(persistent):
    kwargs = dict(num_workers=2, batch_size=3, persistent_workers=persistent)
    ours = _batches(ringloader.DataLoader, Sharded(11), epochs=2, **kwargs)
    torchs = _batches(TorchDataLoader, Sharded(11), epochs=2, **kwargs)
    assert_same(ours[0], torchs[0])
    assert_same(ours[1], torchs[1])


def test_a_persistent_epoch_left_half_way_then_a_whole_one():
    def run(loader_class):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = loader_class(Sharded(30), batch_size=2, num_workers=2,
                                  persistent_workers=True)
            first = list(itertools.islice(loader, 3))
            return first, list(loader)
    ours, torchs = run(ringloader.DataLoader), run(TorchDataLoader)
    assert_same(ours[0], torchs[0])
    assert_same(ours[1], torchs[1])


class Epochs(IterableDataset):
    """WebDataset's and Hugging Face's convention: set_epoch reshuffles."""

    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        info = get_worker_info()
        return iter(range(self.epoch * 100 + info.id, self.epoch * 100 + 6, info.num_workers))


def test_set_epoch_reaches_the_dataset_of_the_next_workers():
    loader = ringloader.DataLoader(Epochs(), batch_size=None, num_workers=2)
    loader.set_epoch(3)
    assert [int(x) for x in loader] == [300, 301, 302, 303, 304, 305]


def test_worker_info_and_seeds_are_torchs():
    kwargs = dict(num_workers=2, batch_size=None)
    ours = _batches(ringloader.DataLoader, SeedsAndDraws(),
                    generator=torch.Generator().manual_seed(7), **kwargs)[0]
    torchs = _batches(TorchDataLoader, SeedsAndDraws(),
                      generator=torch.Generator().manual_seed(7), **kwargs)[0]
    assert_same(ours, torchs)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_endless_stream_read_with_islice(num_workers):
    def first(loader_class):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = loader_class(Endless(), batch_size=4, num_workers=num_workers)
            return list(itertools.islice(loader, 7))
    assert_same(first(ringloader.DataLoader), first(TorchDataLoader))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_iterator_that_raises_is_reraised_with_its_type(num_workers):
    def failure(loader_class):
        got = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = loader_class(Breaks(), batch_size=None, num_workers=num_workers)
            with pytest.raises(Exception) as caught:
                for batch in loader:
                    got.append(batch)
        return got, caught.value
    ours, our_error = failure(ringloader.DataLoader)
    torchs, torch_error = failure(TorchDataLoader)
    assert type(our_error) is type(torch_error) is BrokenStream
    assert "stream broke at 3" in str(our_error)
    assert_same(ours, torchs)


class StumblesOnce(IterableDataset):
    """Each worker's items (worker, 0), (worker, 1), ...; worker 1's second
    item raises, and its iterator goes on after it (a class iterator, not a
    generator, which would end at its exception)."""

    def __iter__(self):
        return _Stumbling(get_worker_info().id)


class _Stumbling:
    def __init__(self, worker):
        self.worker, self.item = worker, 0

    def __iter__(self):
        return self

    def __next__(self):
        item, self.item = self.item, self.item + 1
        if item >= 5:
            raise StopIteration
        if self.worker == 1 and item == 1:
            raise BrokenStream(f"worker 1 stumbled at item {item}")
        return torch.tensor([self.worker, item])


def test_after_a_workers_exception_the_order_goes_on_as_torchs():
    """In torch a failed task uses up its worker's turn: the batch after the
    error comes from the next worker, not again from the one that raised."""
    def run(loader_class):
        batches, errors = [], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            iterator = iter(loader_class(StumblesOnce(), batch_size=None, num_workers=2))
            while True:
                try:
                    batches.append(tuple(next(iterator).tolist()))
                except StopIteration:
                    return batches, errors
                except BrokenStream:
                    errors += 1
                    batches.append("error")
    ours, torchs = run(ringloader.DataLoader), run(TorchDataLoader)
    assert torchs[1] == 1 and torchs[0][3] == "error"
    assert ours == torchs


def test_the_fallback_says_why_once(monkeypatch):
    from ringloader._trainer import torch_fallback as _torch_fallback
    monkeypatch.setattr(_torch_fallback, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            loader = ringloader.DataLoader(Sharded(6), batch_size=2)
    notes = [w for w in caught if "torch's own DataLoader loads it" in str(w.message)]
    assert len(notes) == 1 and "Sharded" in str(notes[0].message)
    assert notes[0].filename == __file__  # points at the caller's line
    assert_same(list(loader), _batches(TorchDataLoader, Sharded(6), batch_size=2)[0])


class Slow(IterableDataset):
    """Large samples, slowly: a worker can be killed in the middle of its stream."""

    def __iter__(self):
        import time
        info = get_worker_info()
        for i in range(40):
            time.sleep(0.01)
            yield torch.full((128, 256), float(i * 10 + info.id))


class Frames(IterableDataset):
    """768 KiB samples, 16 per worker."""

    def __iter__(self):
        info = get_worker_info()
        for i in range(16):
            yield torch.full((3, 256, 256), float(i * 10 + info.id))


def test_batches_are_views_of_the_ring_slot_and_kept_ones_cost_their_size():
    from ringloader._slots import batch_codec as _batch_codec
    loader = ringloader.DataLoader(Frames(), batch_size=4, num_workers=2,
                                   persistent_workers=True)
    kept = list(loader)
    assert_same(kept, _batches(TorchDataLoader, Frames(), batch_size=4, num_workers=2)[0])
    # No copy: each batch lies in its slot after the codec's header; the
    # slot's storage is cut to what the batch uses, so keeping all of them
    # (every one spilled once its slot came round) cost their own bytes.
    first = kept[0]
    assert first.storage_offset() * first.element_size() == _batch_codec.HEADER_BYTES
    for batch in kept:
        nbytes = batch.storage().size() * batch.element_size()
        assert batch.numel() * 4 < nbytes < batch.numel() * 4 + 4096
    assert sum(worker["spilled_batches"] for worker in loader.stats()["iterable_workers"]) > 0


def test_a_restarted_worker_refuses_to_replay_its_stream():
    import signal
    loader = ringloader.DataLoader(Slow(), batch_size=2, num_workers=2)
    iterator = iter(loader)
    # Worker 1 has made a batch (a worker killed before its first task
    # loses nothing: its replacement starts the stream afresh).
    seen = [next(iterator), next(iterator)]
    os.kill(loader.worker_pids()[1], signal.SIGKILL)  # worker 1's stub: it dies too
    with pytest.raises(RuntimeError, match="IterableDataset worker 1 .* restarted"):
        for batch in iterator:
            seen.append(batch)
    # What came before the error is torch's order: no batch repeated or skipped.
    torchs = list(itertools.islice(TorchDataLoader(Slow(), batch_size=2, num_workers=2),
                                   len(seen)))
    assert_same(seen, torchs)


def test_ctrl_c_while_a_batch_is_handed_over_loses_nothing(monkeypatch):
    from ringloader._slots import batch_codec as _batch_codec
    decode, calls = _batch_codec.decode, []

    def interrupted_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return decode(*args, **kwargs)

    monkeypatch.setattr(_batch_codec, "decode", interrupted_once)
    iterator = iter(ringloader.DataLoader(Sharded(20), batch_size=3, num_workers=2))
    got = [next(iterator), next(iterator)]
    with pytest.raises(KeyboardInterrupt):
        next(iterator)
    got.extend(iterator)  # the same iterator goes on, the batch put back
    assert_same(got, _batches(TorchDataLoader, Sharded(20), batch_size=3, num_workers=2)[0])


def collate_with_pid(samples):
    return default_collate(samples), torch.tensor(os.getpid())


class Patient(IterableDataset):
    """Items 0.4 s apart: a batch of 8 takes longer than hang_timeout."""

    def __iter__(self):
        import time
        for i in range(8):
            time.sleep(0.4)
            yield i


def test_a_slow_stream_is_not_judged_hung_while_items_come():
    loader = ringloader.DataLoader(Patient(), batch_size=8, num_workers=1,
                                   hang_timeout=1.5)
    assert [batch.tolist() for batch in loader] == [list(range(8))]


def test_collate_fn_runs_in_the_workers():
    kwargs = dict(batch_size=4, num_workers=2, collate_fn=collate_with_pid)
    ours = _batches(ringloader.DataLoader, Sharded(16), **kwargs)[0]
    torchs = _batches(TorchDataLoader, Sharded(16), **kwargs)[0]
    assert_same([b[0] for b in ours], [b[0] for b in torchs])
    pids = {int(b[1]) for b in ours}
    assert len(pids) == 2 and os.getpid() not in pids


def test_len_is_torchs():
    class Sized(Sharded):
        def __len__(self):
            return self.stop - self.start

    for kwargs in (dict(batch_size=4), dict(batch_size=4, drop_last=True),
                   dict(batch_size=None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert len(ringloader.DataLoader(Sized(23), num_workers=2, **kwargs)) == len(
                TorchDataLoader(Sized(23), num_workers=2, **kwargs))
    with pytest.raises(TypeError):
        len(ringloader.DataLoader(Sharded(23), num_workers=2))


class Growing(IterableDataset):
    """Batches from a few bytes to 120 MB and back."""

    def __iter__(self):
        info = get_worker_info()
        for n, numel in enumerate((1000, 300_000, 3_000_000, 10_000_000, 20)):
            yield {"x": torch.arange(numel, dtype=torch.float32) + info.id,
                   "name": f"batch {n}", "big": torch.full((numel // 2,), n)}


def test_batches_of_any_size_travel_without_a_byte_budget():
    kwargs = dict(batch_size=None, num_workers=2)
    ours = _batches(ringloader.DataLoader, Growing(), **kwargs)[0]
    assert_same(ours, _batches(TorchDataLoader, Growing(), **kwargs)[0])


def test_a_batch_over_max_batch_bytes_is_refused_naming_its_size():
    loader = ringloader.DataLoader(Growing(), batch_size=None, num_workers=1,
                                   max_batch_bytes=1 << 20)
    iterator = iter(loader)
    assert next(iterator)["name"] == "batch 0"
    with pytest.raises(ringloader.OptionError,
                       match=r"worker 0: a batch needs at least \d+ bytes .*max_batch_bytes"):
        next(iterator)


def test_torchs_argument_errors_for_iterable_datasets():
    for kwargs in (dict(shuffle=True), dict(sampler=[0, 1]),
                   dict(batch_sampler=[[0, 1]], batch_size=1)):
        for loader_class in (TorchDataLoader, ringloader.DataLoader):
            with pytest.raises(ValueError, match="expected unspecified"):
                loader_class(Sharded(4), num_workers=2, **kwargs)


SCRIPT = """\
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
class Lines(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        return iter(range(info.id if info else 0, 10, info.num_workers if info else 1))
if __name__ == "__main__":
    loader = DataLoader(Lines(), batch_size=3, num_workers=2)
    print(type(loader).__module__, isinstance(loader, DataLoader))
    print([batch.tolist() for batch in loader])
"""


def test_python_m_ringloader_runs_a_streaming_script_unchanged(tmp_path):
    script = tmp_path / "stream.py"
    script.write_text(SCRIPT)
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    runs = {}
    for swap in (False, True):
        command = [sys.executable, *(["-m", "ringloader"] if swap else []), str(script)]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        runs[swap] = done.stdout.splitlines()
    assert runs[False][0] == "torch.utils.data.dataloader True"
    assert runs[True][0].startswith("ringloader.") and runs[True][0].endswith(" True")
    assert runs[True][1] == runs[False][1] == str(
        [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]])
