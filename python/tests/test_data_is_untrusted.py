# SPDX-License-Identifier: BSD-3-Clause
"""A dataset is untrusted input (docs/security.md): nothing in a sample's
bytes or name may decide what the trainer loads, runs or deletes.

A worker's error text starts with the sample's name (a tar member's, a
file's), which whoever made the data chose. These tests name, in that
text, files the trainer must never open: a pickle hidden in the shard's
own first header, one planted by another user, a FIFO. A Python worker's
exception must come back with its type all the same, and its record must
leave nothing on disk for another user to read or for a killed trainer to
leave behind."""
import io
import os
import select
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time

import numpy as np
import pytest

import ringloader
from conftest import NOBODY, env_importing_ringloader, python_for_nobody

needs_root = pytest.mark.cross_user  # as nobody: needs root (conftest.py counts it)


def _png(side):
    from PIL import Image
    pixels = np.random.default_rng(side).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _pickle_that_creates(path):
    """Protocol 0 (printable text): unpickled, it runs open(path, "w")."""
    return f"cbuiltins\nopen\n(V{path}\nVw\ntR."


@pytest.fixture
def short_dir():
    """A folder with a short path (a tar header's name holds 100 bytes)
    that `nobody` can enter."""
    folder = tempfile.mkdtemp(prefix="rl", dir="/tmp")
    os.chmod(folder, 0o755)
    yield folder
    subprocess.run(["rm", "-rf", folder], check=False)


def _shard(folder, marker_target, first_name="000000.png"):
    """A shard (no dot in its name: a member's key ends at its first dot)
    of two good samples, then one too small for RandomCrop(32) whose name
    carries the old record marker, naming `marker_target`."""
    path = os.path.join(folder, "shard")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, side in ((first_name, 48), ("000001.png", 48),
                           (f"[python-exception {marker_target}] x.png", 16)):
            data = _png(side)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _loader(shard):
    transform = ringloader.transforms.Compose([ringloader.transforms.RandomCrop(32),
                                               ringloader.transforms.ToTensor()])
    return ringloader.DataLoader(ringloader.datasets.TarShards(shard, transform=transform),
                                 batch_size=1, num_workers=1)


def _read_all(shard, unblock=None, wait_s=30):
    """Reads every batch in a thread; returns (batches, the exception) or
    raises AssertionError when the trainer still blocks after `wait_s`
    (`unblock` then frees it, so the test ends)."""
    result = {}

    def read():
        got = []
        try:
            for batch in _loader(shard):
                got.append(batch)
        except BaseException as error:  # noqa: BLE001  (the test judges it)
            result["error"] = error
        result["batches"] = got
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(wait_s)
    if thread.is_alive():
        if unblock is not None:
            unblock()
        thread.join(30)
        raise AssertionError(f"the trainer blocked for {wait_s} s on a name in the data")
    return result["batches"], result.get("error")


def _assert_names_the_bad_sample(batches, error):
    """The two good samples came, then an error naming the third."""
    assert len(batches) == 2, (len(batches), error)
    assert isinstance(error, ringloader.Error), repr(error)
    assert "python-exception" in str(error) and "x" in str(error), str(error)


def test_a_shard_naming_itself_runs_nothing_in_the_trainer(short_dir):
    """The shard's first header is a pickle (its first member's name), and
    a later member's name points the trainer at the shard itself."""
    marker = os.path.join(short_dir, "ran")
    shard_path = os.path.join(short_dir, "shard")
    first = _pickle_that_creates(marker)
    # Its key ends at the pickle's STOP ("."), its extension is "png".
    assert len(first) + len("png") <= 100, first
    _shard(short_dir, shard_path, first_name=first + "png")
    with open(shard_path, "rb") as shard:  # the exploit's premise holds
        assert shard.read(len(first)) == first.encode()
    batches, error = _read_all(shard_path)
    assert not os.path.exists(marker), "the trainer unpickled the shard"
    _assert_names_the_bad_sample(batches, error)
    assert os.path.exists(shard_path)


@needs_root
def test_a_pickle_planted_by_another_user_is_neither_loaded_nor_deleted(short_dir):
    world = os.path.join(short_dir, "world")
    os.mkdir(world)
    os.chmod(world, 0o1777)  # as /tmp
    marker, planted = os.path.join(world, "ran"), os.path.join(world, "planted")
    python = python_for_nobody(stdlib_only=True)
    assert python, f"no Python that uid {NOBODY} can run"
    subprocess.run([python, "-S", "-c",
                    "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                    planted, _pickle_that_creates(marker)],
                   user=NOBODY, group=NOBODY, extra_groups=[], cwd="/", check=True,
                   timeout=60)
    assert os.stat(planted).st_uid == NOBODY
    batches, error = _read_all(_shard(short_dir, planted))
    assert not os.path.exists(marker), "root unpickled a file nobody planted"
    assert os.path.exists(planted), "root deleted a file a sample named"
    _assert_names_the_bad_sample(batches, error)


def test_a_name_pointing_at_a_fifo_does_not_block_the_trainer(short_dir):
    fifo = os.path.join(short_dir, "fifo")
    os.mkfifo(fifo)

    def unblock():  # a reader blocked in open() gets EOF
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    batches, error = _read_all(_shard(short_dir, fifo), unblock, wait_s=20)
    _assert_names_the_bad_sample(batches, error)


# A trainer whose Python worker fails a batch it never takes: the record
# of that failure is pending. argv: the flag folder.
PENDING_FAILURE = textwrap.dedent("""
    import gc, os, sys, time, torch
    import ringloader

    flags = sys.argv[1]

    class FailsAtOne(torch.utils.data.Dataset):
        def __init__(self, name):
            self.name = name

        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 1:
                open(os.path.join(flags, self.name), "w").close()
                raise KeyError(f"secret traceback of {self.name}")
            return torch.full((2,), float(i))

    def pending(name):
        loader = ringloader.DataLoader(FailsAtOne(name), batch_size=1, num_workers=1)
        iterator = iter(loader)
        next(iterator)  # the worker goes on to sample 1, and fails it
        while not os.path.exists(os.path.join(flags, name)):
            time.sleep(0.05)
        time.sleep(1.0)  # its record is written by now
        return loader, iterator

    loader, iterator = pending("dropped")
    print("PENDING", flush=True)
    sys.stdin.readline()
    del loader, iterator
    gc.collect()
    time.sleep(1.0)
    print("DROPPED", flush=True)
    loader, iterator = pending("killed")
    print("PENDING", flush=True)
    time.sleep(600)
""")


def _files_under(folder):
    found = []
    for root, dirs, files in os.walk(folder):
        found += [os.path.join(root, name) for name in dirs + files]
    return found


def _expect(process, word, timeout=120):
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline() if ready else ""
    assert line.strip() == word, (line, process.stderr.read()[-3000:] if not ready else "")


def test_worker_exception_records_are_private_and_do_not_outlive_the_loader(tmp_path):
    """Nothing another user can read while the record is pending; nothing
    left once the loader is dropped, nor once the trainer is killed -9."""
    temp, flags = tmp_path / "tmp", tmp_path / "flags"
    temp.mkdir()
    flags.mkdir()
    env = env_importing_ringloader({"TMPDIR": str(temp)})
    trainer = subprocess.Popen([sys.executable, "-c", PENDING_FAILURE, str(flags)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _expect(trainer, "PENDING")
        shown = [(path, oct(os.stat(path).st_mode)) for path in _files_under(temp)
                 if os.stat(path).st_mode & 0o044]
        assert not shown, f"readable by other users: {shown}"
        trainer.stdin.write("go\n")
        trainer.stdin.flush()
        _expect(trainer, "DROPPED")
        assert _files_under(temp) == [], "left behind by a dropped loader"
        _expect(trainer, "PENDING")
        trainer.kill()
        trainer.wait(60)
        deadline = time.monotonic() + 30
        while _files_under(temp) and time.monotonic() < deadline:
            time.sleep(0.1)  # (a server still ending)
        assert _files_under(temp) == [], "left behind by a trainer killed -9"
    finally:
        if trainer.poll() is None:
            trainer.send_signal(signal.SIGKILL)
            trainer.wait()


def test_a_python_workers_exception_still_comes_back_with_its_type():
    """The record travels on the worker's channel, not through the text."""
    import torch

    class Missing(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("[python-exception /etc/passwd] not a marker any more")
            return torch.zeros(2)

    loader = ringloader.DataLoader(Missing(), batch_size=1, num_workers=2)
    with pytest.raises(KeyError) as caught:
        list(loader)
    message = str(caught.value)
    assert "Caught KeyError in DataLoader worker process" in message
    assert "sample 2, batch 2 of epoch 0, pid " in message, message
    assert "Original Traceback" in message and "__getitem__" in message


@pytest.mark.parametrize("entry", ["/etc/passwd", "../outside.png", "a/../../outside.png"])
def test_a_list_file_names_nothing_outside_its_folder(tmp_path, entry):
    """A downloaded list file is data: an entry outside its folder is
    refused, naming the file, the line and the entry."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "ok.png").write_bytes(_png(8))
    (tmp_path / "outside.png").write_bytes(_png(8))
    listed = folder / "train.txt"
    listed.write_text(f"ok.png 0\n{entry} 1\n")
    with pytest.raises(ringloader.OptionError) as error:
        ringloader.datasets.FileList(str(listed))
    message = str(error.value)
    assert str(listed) in message and "line 2" in message and entry in message


def test_a_list_file_reads_what_is_under_its_folder(tmp_path):
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.png").write_bytes(_png(8))
    listed = folder / "train.txt"
    listed.write_text("sub/a.png 3\n./sub/../sub/a.png 4\n")
    files = ringloader.datasets.FileList(str(listed))
    assert [label for _, label in files.samples] == [3, 4]
