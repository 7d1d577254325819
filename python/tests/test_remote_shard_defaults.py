# SPDX-License-Identifier: BSD-3-Clause
"""TarShards(pipe_urls) with its defaults (no index, no cache_dir), issue
46: a shuffled epoch runs each shard's command once (indexing fetches it
into a private cache that the workers read; no worker streams or restarts
a command), later epochs run none, the first batch does not wait for
shuffle_buffer samples to be indexed, the private folder is this user's,
0700, and is removed with the dataset, or by the next one after a kill -9."""
import gc
import os
import signal
import stat
import subprocess
import sys
import threading

import pytest
import torch

import ringloader
from ringloader import transforms as T
from conftest import write_image_folder
from test_shard_reencode import tool
from test_tar_shards import batches

PIPELINE = T.Compose([T.Resize((8, 8)), T.ToTensor()])


def make_shards(tmp_path, per_shard, images):
    folder = write_image_folder(str(tmp_path / "images"), classes=4,
                                per_class=images // 4, ext="png")
    os.makedirs(tmp_path / "shards")
    subprocess.run([tool(), folder, str(tmp_path / "shards" / "s-%04d.tar"),
                    "--max-count", str(per_shard)], check=True, stdout=subprocess.DEVNULL)
    return sorted(str(p) for p in (tmp_path / "shards").glob("*.tar"))


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """TMPDIR for the private cache folders, so the test sees only its own."""
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    return base


def private_folders(base):
    return sorted(p.name for p in base.iterdir() if p.name.startswith("ringloader-shards-"))


def logged_urls(tmp_path, shards, prelude=""):
    """pipe: URLs whose command logs its shard to runs.log, then cats it."""
    log = tmp_path / "runs.log"
    script = tmp_path / "fetch.sh"
    script.write_text(f'{prelude}\necho "$1" >> {log}\ncat "$1"\n')
    return [f"pipe:sh {script} {s}" for s in shards], log


def runs(log):
    return log.read_text().split() if log.exists() else []


def test_a_shuffled_epoch_runs_each_command_once(tmp_path, private_tmp):
    shards = make_shards(tmp_path, 10, 120)
    urls, log = logged_urls(tmp_path, shards)
    dataset = ringloader.datasets.TarShards(urls, PIPELINE)
    loader = ringloader.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, seed=5)
    seen = []
    for epoch in range(2):
        for _, y in loader:
            seen.extend(y.tolist())
        # Before: each worker streamed every shard it read, besides the
        # indexer's pass (2-4 runs per shard here, more with restarts).
        assert sorted(runs(log)) == sorted(shards), f"epoch {epoch}"
    assert len(seen) == 2 * len(dataset) == 240
    assert len(private_folders(private_tmp)) == 1
    del loader, dataset
    gc.collect()
    assert private_folders(private_tmp) == []


def test_the_first_batch_does_not_wait_for_the_shuffle_buffer(tmp_path, private_tmp):
    # 30 shards of 40: the default buffer (1000) fills only after 26 shards.
    # Commands past the 16th wait for a gate: the first batch must come
    # from the shards before it (it used to wait for 1000 + 8 samples).
    shards = make_shards(tmp_path, 40, 1200)
    gate = tmp_path / "gate"
    # The wait lets the loader say its shard order before the indexer's
    # first 8 streams are done with shards 0-7; the ticket is a counter
    # under flock.
    prelude = (f"sleep 1\nexec 9>>{tmp_path}/ticket.lock\nflock 9\n"
               f"n=$(( $(cat {tmp_path}/ticket 2>/dev/null || echo 0) + 1 ))\n"
               f"echo $n > {tmp_path}/ticket\nflock -u 9\n"
               f"if [ $n -gt 16 ]; then while [ ! -e {gate} ]; do sleep 0.02; done; fi")
    urls, log = logged_urls(tmp_path, shards, prelude)
    dataset = ringloader.datasets.TarShards(urls, PIPELINE)
    loader = ringloader.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, seed=3)
    late = threading.Timer(30, gate.touch)  # a loader that waits for the buffer would hang
    late.start()
    try:
        it = iter(loader)
        x, _ = next(it)
        assert not gate.exists(), "the first batch waited for the whole shuffle buffer"
        assert x.shape == (8, 3, 8, 8) and len(runs(log)) <= 16
        gate.touch()
        assert 1 + sum(1 for _ in it) == 150
    finally:
        late.cancel()
        gate.touch()


def test_same_epochs_as_streaming_and_per_seed(tmp_path, private_tmp):
    shards = make_shards(tmp_path, 10, 60)
    urls, _ = logged_urls(tmp_path, shards)

    def epochs(**kwargs):
        dataset = ringloader.datasets.TarShards(urls, PIPELINE, **kwargs)
        loader = ringloader.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2,
                                       seed=11)
        return [batches(loader) for _ in range(2)]

    cached, again, streamed = epochs(), epochs(), epochs(private_cache=False)
    for a, b, c in zip(cached, again, streamed):
        assert len(a) == len(b) == len(c) == 8
        for (x, y), (bx, by), (cx, cy) in zip(a, b, c):
            assert torch.equal(x, bx) and torch.equal(y, by)
            assert torch.equal(x, cx) and torch.equal(y, cy)
    # Shuffled: not the archive order.
    assert [y for _, ys in cached[0] for y in ys.tolist()] != sorted(
        y for _, ys in cached[0] for y in ys.tolist())


def test_private_folder_is_private_and_swept_after_kill(tmp_path, private_tmp):
    shards = make_shards(tmp_path, 10, 20)
    urls, _ = logged_urls(tmp_path, shards)
    dataset = ringloader.datasets.TarShards(urls, PIPELINE, index_in_background=False)
    (name,) = private_folders(private_tmp)
    info = os.stat(private_tmp / name)
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    for entry in (private_tmp / name).iterdir():
        assert stat.S_IMODE(entry.stat().st_mode) & 0o077 == 0, entry.name
    assert len(dataset) == 20
    # A process killed outright leaves its folder; the next dataset made
    # sweeps it (its owner lock is free), never a live one's.
    child = subprocess.run(
        [sys.executable, "-c",
         "import os, signal, sys, ringloader\n"
         "d = ringloader.datasets.TarShards(sys.argv[1:], index_in_background=False)\n"
         "assert len(d) == 20\n"
         "os.kill(os.getpid(), signal.SIGKILL)\n", *urls],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == -signal.SIGKILL
    left = private_folders(private_tmp)
    assert len(left) == 2 and name in left
    other = ringloader.datasets.TarShards(urls, PIPELINE, index_in_background=False)
    now = private_folders(private_tmp)
    assert name in now and len(now) == 2 and not set(left) - {name} & set(now)
    del other
    gc.collect()
    assert private_folders(private_tmp) == [name]
    del dataset
    gc.collect()
    assert private_folders(private_tmp) == []
