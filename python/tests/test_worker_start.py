# SPDX-License-Identifier: BSD-3-Clause
"""How Python workers start and what they run: never the trainer's main
script (unguarded scripts, -c, stdin and -m work as with torch's fork), the
sample-0 probe outside the trainer, and non-persistent workers that see the
dataset as it is at each epoch. Each against torch's DataLoader."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import ringloader
from conftest import env_importing_ringloader, parent_pid

HERE = os.path.dirname(os.path.abspath(__file__))
# The folder holding the ringloader these tests import (the build tree's
# python/, or site-packages when installed), for the scripts they start.

# A training script as a user writes it: no __main__ guard, its dataset
# class defined in __main__, a line appended at top level each time the body
# runs, a flag it parses from sys.argv.
SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import ringloader

    MARKER = {marker!r}
    with open(MARKER, "a") as f:
        f.write(repr(sys.argv) + "\\n")
    assert "--index" not in sys.argv, sys.argv

    class Records(torch.utils.data.Dataset):
        def __len__(self):
            return 23

        def __getitem__(self, i):
            return torch.arange(4, dtype=torch.float32) * i, {{"id": i, "half": i / 2}}

    def scale(batch):
        return torch.utils.data.default_collate(batch)

    ours = [b for b in ringloader.DataLoader(Records(), batch_size=5, num_workers=2,
                                             collate_fn=scale)]
    theirs = list(torch.utils.data.DataLoader(Records(), batch_size=5, num_workers=2,
                                              collate_fn=scale))
    assert len(ours) == len(theirs) == 5
    for (x, meta), (tx, tmeta) in zip(ours, theirs):
        assert torch.equal(x, tx)
        assert torch.equal(meta["id"], tmeta["id"])
        assert torch.equal(meta["half"], tmeta["half"])
    print("SCRIPT-OK")
""")


def _run(args, cwd, stdin=None, env=None):
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, env=env_importing_ringloader(env),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["file", "module", "stdin", "dash_c", "spawned_zygote"])
def test_unguarded_script_body_runs_once_and_matches_torch(tmp_path, how):
    marker = tmp_path / "ran.txt"
    source = SCRIPT.format(marker=str(marker))
    if how == "spawned_zygote":  # as when the trainer had threads at import
        (tmp_path / "train.py").write_text(source)
        result = _run(["train.py"], tmp_path, env={"RINGLOADER_ZYGOTE": "spawn"})
    elif how == "file":
        (tmp_path / "train.py").write_text(source)
        result = _run(["train.py", "--epochs", "1"], tmp_path)
    elif how == "module":
        package = tmp_path / "pkg"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "train.py").write_text(source)
        result = _run(["-m", "pkg.train", "--epochs", "1"], tmp_path)
    elif how == "stdin":
        result = _run(["-"], tmp_path, stdin=source)
    else:
        result = _run(["-c", source], tmp_path)
    assert result.returncode == 0 and "SCRIPT-OK" in result.stdout, (
        result.stdout + result.stderr)
    assert len(marker.read_text().splitlines()) == 1, marker.read_text()


class RecordsPid(torch.utils.data.Dataset):
    """Appends the pid of every process that runs __getitem__."""

    def __init__(self, path, n=12):
        self.path, self.n = path, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")
        return torch.full((2,), float(i)), i


def _pids(path):
    with open(path) as f:
        return {int(line) for line in f.read().split()}


def test_sample_zero_probe_runs_outside_the_trainer(tmp_path):
    ours_path, theirs_path = tmp_path / "ours.txt", tmp_path / "theirs.txt"
    ours = list(ringloader.DataLoader(RecordsPid(str(ours_path)), batch_size=4,
                                      num_workers=2))
    theirs = list(torch.utils.data.DataLoader(RecordsPid(str(theirs_path)),
                                              batch_size=4, num_workers=2))
    assert os.getpid() not in _pids(theirs_path)
    assert os.getpid() not in _pids(ours_path)
    for (x, y), (tx, ty) in zip(ours, theirs):
        assert torch.equal(x, tx) and torch.equal(y, ty)


def test_workers_descend_from_the_zygote_not_the_trainer(tmp_path):
    from ringloader._trainer import zygote_process as _zygote_process
    path = tmp_path / "pids.txt"
    loader = ringloader.DataLoader(RecordsPid(str(path)), batch_size=4, num_workers=2)
    list(loader)
    # The loader's own zygote (a fork of the trainer) forked its server
    # where the trainer could be forked; else the trainer's zygote did.
    zygote = loader._backend._workers.zygote or _zygote_process.zygote_for_use()
    zygote_pid = zygote.pid if zygote.process is None else zygote.process.pid
    lines = [int(line) for line in path.read_text().split()]
    server, workers = lines[0], set(lines[1:])  # sample 0 is probed by the server
    assert server not in workers and workers
    assert parent_pid(server) == zygote_pid and parent_pid(zygote_pid) == os.getpid()
    for pid in workers:
        assert parent_pid(pid) == server


class Shifted(torch.utils.data.Dataset):
    def __init__(self, n=10):
        self.n, self.offset = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([float(i + self.offset)])


@pytest.mark.parametrize("persistent", [False, True])
def test_dataset_changes_between_epochs_reach_workers_as_with_torch(persistent):
    def epochs(make):
        dataset = Shifted()
        loader = make(dataset, batch_size=4, num_workers=2,
                      persistent_workers=persistent)
        dataset.offset = 100  # after construction, before the first iter()
        first = [b.clone() for b in loader]
        dataset.offset = 1000  # between epochs
        second = [b.clone() for b in loader]
        dataset.n = 10  # unchanged pickle: the workers are kept
        third = [b.clone() for b in loader]
        return first, second, third

    ours = epochs(ringloader.DataLoader)
    theirs = epochs(torch.utils.data.DataLoader)
    for epoch, (a, b) in enumerate(zip(ours, theirs)):
        assert len(a) == len(b) == 3
        for x, y in zip(a, b):
            assert torch.equal(x, y), (persistent, epoch, x, y)
    assert theirs[1][0][0].item() == (100 if persistent else 1000)


def test_unchanged_dataset_keeps_its_workers():
    loader = ringloader.DataLoader(Shifted(), batch_size=4, num_workers=2)
    list(loader)
    before = loader.worker_pids()
    list(loader)
    assert loader.worker_pids() == before


class FailsAtZero(Shifted):
    def __getitem__(self, i):
        raise LookupError(f"no record {i} in /data/table.db")


def test_sample_zero_failure_keeps_its_type_and_worker_traceback():
    with pytest.raises(LookupError) as caught:
        ringloader.DataLoader(FailsAtZero(), batch_size=4, num_workers=2)
    message = str(caught.value)
    assert "sample 0" in message and "/data/table.db" in message
    assert "in __getitem__" in message  # the worker's traceback


class Slow(torch.utils.data.Dataset):
    """Records its pids, slowly enough for a kill to land mid-epoch."""

    def __init__(self, path, n=40):
        self.path, self.n = path, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import time
        time.sleep(0.005)
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")
        return torch.full((3,), float(i)), i


def test_killing_the_forked_worker_itself_is_detected_and_replaced(tmp_path):
    path = tmp_path / "pids.txt"
    loader = ringloader.DataLoader(Slow(str(path)), batch_size=4, num_workers=2,
                                   ring_slots=3)
    got = []
    for b, (x, y) in enumerate(loader):
        if b == 1:
            # The last sample's process: a worker (the first line is the
            # loader server's sample-0 probe).
            with open(path) as f:
                os.kill(int(f.read().split()[-1]), signal.SIGKILL)
        got.append(y.clone())
    assert torch.equal(torch.cat(got), torch.arange(40))
    assert loader.stats()["worker_restarts"] >= 1


def test_dataset_module_that_imports_ringloader_first_unpickles(tmp_path):
    # The zygote forks at `import ringloader`, while mydata.py's body has not
    # run yet: the workers must import mydata afresh, not find it half-done.
    (tmp_path / "mydata.py").write_text(textwrap.dedent("""
        import ringloader
        import torch

        class Numbers(torch.utils.data.Dataset):
            def __len__(self):
                return 9

            def __getitem__(self, i):
                return torch.tensor([i, i * i])
    """))
    # mydata is the first to import ringloader, as a user's package would be.
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch
        from mydata import Numbers
        import ringloader
        ours = torch.cat(list(ringloader.DataLoader(Numbers(), batch_size=4,
                                                    num_workers=2)))
        assert torch.equal(ours, torch.tensor([[i, i * i] for i in range(9)]))
        print("SCRIPT-OK")
    """))
    result = _run(["train.py"], tmp_path)
    assert result.returncode == 0 and "SCRIPT-OK" in result.stdout, (
        result.stdout + result.stderr)


class HangsAt5(Slow):
    def __getitem__(self, i):
        if i == 5:
            with open(self.path, "a") as f:
                f.write(f"{os.getpid()}\n")
            import time
            time.sleep(3600)
        return torch.full((3,), float(i)), i


def _gone(pid, within=3.0):
    import time
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_hung_forked_worker_dies_with_its_stub(tmp_path):
    # The pool kills the stub's process group; the forked worker is in it.
    path = tmp_path / "pids.txt"
    loader = ringloader.DataLoader(HangsAt5(str(path), n=8), batch_size=4,
                                   num_workers=1, hang_timeout=0.5, max_batch_retries=0)
    with pytest.raises(ringloader.WorkerError, match="hung"):
        list(loader)
    hung = int(path.read_text().split()[-1])
    assert _gone(hung)


def test_a_spawned_zygote_whose_trainer_went_away_exits_quietly(tmp_path):
    # The trainer's end of the control socket closes while the spawned
    # zygote still imports torch (a short script, or one that ends early):
    # its "ready" byte then meets a closed socket. It must end without a
    # traceback on the user's terminal (it printed a BrokenPipeError).
    script = tmp_path / "quick.py"
    script.write_text(
        "import time, ringloader\n"
        "from ringloader._trainer import zygote_process as zp\n"
        "zygote = zp._zygote_process\n"
        "zygote.control.close()\n"
        "zygote.process.wait(timeout=60)\n"
        "print('EXIT', zygote.process.returncode)\n")
    result = _run([str(script)], tmp_path, env={"RINGLOADER_ZYGOTE": "spawn"})
    assert result.returncode == 0 and "EXIT 0" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_no_socket_is_left_to_the_collector_in_trainer_zygote_or_server(tmp_path):
    # Under `python -X dev` (and pytest) every socket finalised unclosed is a
    # ResourceWarning on stderr: the trainer's end of the zygote's control
    # socket at exit, the zygote's, and each loader server's two.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import gc
        import torch
        import ringloader

        class Squares(torch.utils.data.Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                return torch.tensor([i * i])

        for _ in range(2):
            loader = ringloader.DataLoader(Squares(), batch_size=4, num_workers=1)
            assert [b.flatten().tolist() for b in loader] == [[0, 1, 4, 9], [16, 25, 36, 49]]
            del loader
            gc.collect()
        print("SCRIPT-OK")
    """))
    run = subprocess.run([sys.executable, "-X", "dev", "-W", "always::ResourceWarning",
                          str(script)], env=env_importing_ringloader(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and "SCRIPT-OK" in run.stdout, run.stderr
    assert "ResourceWarning" not in run.stderr, run.stderr
