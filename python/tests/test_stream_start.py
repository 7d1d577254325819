# SPDX-License-Identifier: BSD-3-Clause
"""How an IterableDataset loader's workers start at each iter() (issue 46,
item 1): side by side, their servers forked from the trainer when the
loader is built (or by the loader's own zygote), so they have the
trainer's modules and no epoch imports them again; and what
torch's re-created workers see, unchanged: a fresh copy of the dataset as
it is at iter(), worker_init_fn once per worker and epoch, torch's
get_worker_info() and seeds."""
import gc
import os
import signal
import time
import warnings

import pytest
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data.dataloader import DataLoader as TorchDataLoader

import ringloader
from conftest import run_with_import_log
from ringloader._trainer import zygote_process as _zygote_process

RENDEZVOUS_S = 5.0


class Rendezvous(IterableDataset):
    """Unpickled (in a loader server) it waits up to RENDEZVOUS_S for the
    servers of the other workers of its epoch to unpickle theirs: it meets
    them only if they start side by side."""

    def __init__(self, folder, workers):
        self.folder, self.workers, self.met = folder, workers, None

    def __setstate__(self, state):
        self.__dict__.update(state)
        open(os.path.join(self.folder, str(os.getpid())), "w").close()
        deadline = time.monotonic() + RENDEZVOUS_S
        while len(os.listdir(self.folder)) < self.workers and time.monotonic() < deadline:
            time.sleep(0.01)
        self.met = len(os.listdir(self.folder)) >= self.workers

    def __iter__(self):
        yield get_worker_info().id, self.met


def test_the_workers_of_an_epoch_start_side_by_side(tmp_path):
    dataset = Rendezvous(None, 3)
    loader = ringloader.DataLoader(dataset, batch_size=None, num_workers=3)
    for epoch in range(2):
        dataset.folder = str(tmp_path / f"epoch{epoch}")
        os.mkdir(dataset.folder)
        # One after the other, the first server waits alone: (0, False).
        assert sorted(loader) == [[0, True], [1, True], [2, True]]  # lists: torch's convert


STREAMLIB = """
import os
from torch.utils.data import IterableDataset, get_worker_info

with open(os.environ["IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")


class Parents(IterableDataset):
    # Each sample: the worker's server, and the process that forked it.
    def __iter__(self):
        server = os.getppid()
        with open(f"/proc/{server}/status") as status:
            zygote = int(status.read().split("PPid:")[1].split()[0])
        yield get_worker_info().id, server, zygote
"""

SCRIPT = """
import os
import ringloader
import streamlib  # imported after ringloader: the trainer's zygote lacks it

loader = ringloader.DataLoader(streamlib.Parents(), batch_size=None, num_workers=2)
epochs = [sorted(loader) for _ in range(2)]
print(os.getpid(), getattr(getattr(loader._backend, "_zygote", None), "pid", None))
print(epochs)
"""


@pytest.mark.parametrize("zygote", ["fork", "spawn"])
def test_no_epoch_imports_the_trainers_modules_again(tmp_path, zygote):
    # fork: the servers are forks of the trainer, with its modules; spawn
    # (the trainer cannot be forked): the trainer's zygote forks the
    # loader's own, which imports them once, unpickling the dataset, and
    # forks the servers.
    (first, second), log = run_with_import_log(
        tmp_path, ("streamlib.py", STREAMLIB), SCRIPT,
        RINGLOADER_ZYGOTE="spawn" if zygote == "spawn" else None)
    trainer, own = first.split()
    # Each server used to import it again while it unpickled the dataset
    # (a second or more a worker and epoch for `datasets`).
    assert log.read_text().split() == ([trainer] if zygote == "fork" else [trainer, own])
    if zygote == "fork":
        assert own == "None"  # no zygote of the loader's was needed
        own = trainer
    trainer, own = int(trainer), int(own)
    epochs = eval(second)  # noqa: S307  (our own script's printout)
    servers = {server for samples in epochs for _, server, _ in samples}
    for samples in epochs:
        assert [worker for worker, _, _ in samples] == [0, 1]
        # fork: the first server is the trainer's child, and forked the other.
        assert {parent for _, _, parent in samples} <= {own} | servers
    # The second epoch renews the first one's processes (_stream_renewal):
    # fresh copies, no new servers.
    assert len(servers) == 2


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return {int(child) for child in children.read().split()}


def _built_with_servers(workers):
    """A loader and the pids of the servers it forked from the trainer when
    it was built (before any iter())."""
    loader = ringloader.DataLoader(Counting(8), batch_size=2, num_workers=workers)
    early = {server.started_pid(10) for server in loader._backend._early}
    if not early:
        pytest.skip("this trainer could not be forked safely (threads or CUDA)")
    assert None not in early
    return loader, early


def _ended(pid):
    """Gone, or a zombie."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return "State:\tZ" in status.read()
    except FileNotFoundError:
        return True


def _gone(pids):
    """Every one of `pids` ended and reaped, within 10 s."""
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and \
            time.monotonic() < deadline:
        _zygote_process.reap_servers()
        time.sleep(0.01)
    return not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_the_first_epochs_servers_are_forked_when_the_loader_is_built():
    loader, early = _built_with_servers(2)
    # The trainer forks the first, which forks the second (none before
    # iter() on main).
    assert len(early) == 2 and len(early & _children(os.getpid())) == 1
    assert early - _children(os.getpid()) <= set().union(*map(_children, early))
    # Each forks its worker's spare before the dataset comes, so no fork
    # is left for iter() (the spare unpickles its own copy then).
    deadline = time.monotonic() + 10
    while not all(_children(server) - early for server in early) and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    spares = set().union(*(_children(server) for server in early)) - early
    assert len(spares) == 2
    ours, torchs = (torch.cat(list(source))[:, [0, 3]]  # samples and worker ids
                    for source in (loader, TorchDataLoader(Counting(8), batch_size=2,
                                                           num_workers=2)))
    assert torch.equal(ours, torchs)
    # Those spares became the workers (the stubs the pool waits on are the
    # trainer's children); no zygote was made to fork others at iter().
    assert set().union(*(_children(server) for server in early)) - early == spares
    assert loader._backend._zygote.pid is None
    # They end with the loader, and the trainer reaps them.
    del loader
    gc.collect()
    assert _gone(early)


def test_a_worker_init_fn_set_after_construction_runs_in_the_servers_forked_then(tmp_path):
    # As Lightning does for seed_everything(workers=True): torch runs it,
    # and nothing else changed, so the servers forked when the loader was
    # built serve (a new backend would fork others at iter()).
    loader, early = _built_with_servers(2)
    loader.dataset.log = str(tmp_path / "inits")
    loader.worker_init_fn = count_inits
    batches = torch.cat(list(loader))
    assert sorted(open(loader.dataset.log).read().split()) == ["0", "1"]
    assert batches[:, 2].tolist() == [1] * len(batches)  # each copy saw its own init
    assert all(_children(server) - early for server in early)
    assert loader._backend._zygote.pid is None


def test_a_loader_whose_early_servers_died_before_iter_starts_its_workers_anew():
    loader, early = _built_with_servers(2)
    for pid in early:
        os.kill(pid, signal.SIGKILL)
    ours, torchs = (torch.cat(list(source))[:, [0, 3]]
                    for source in (loader, TorchDataLoader(Counting(8), batch_size=2,
                                                           num_workers=2)))
    assert torch.equal(ours, torchs)
    # The first is reaped as its loader found it dead; the second, an
    # orphan of the first, waits for init (which some containers' never
    # reaps).
    deadline = time.monotonic() + 10
    while not all(_ended(pid) for pid in early) and time.monotonic() < deadline:
        _zygote_process.reap_servers()
        time.sleep(0.01)
    assert all(_ended(pid) for pid in early)
    # Their replacements came from a zygote of the loader's, which ends
    # with the loader.
    zygote = loader._backend._zygote.pid
    assert zygote is not None
    del loader
    gc.collect()
    assert _gone([zygote])


def test_a_loader_never_iterated_leaves_no_server_behind():
    loader, early = _built_with_servers(2)
    del loader
    gc.collect()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in early)  # reaped at once


def test_where_the_trainer_cannot_be_forked_its_zygote_forks_the_loaders(monkeypatch):
    monkeypatch.setattr(_zygote_process, "_fork_is_safe", lambda: False)
    def loader(loader_class):
        return loader_class(Counting(9), batch_size=3, num_workers=2,
                            generator=torch.Generator().manual_seed(3))
    ours = loader(ringloader.DataLoader)
    assert ours._backend._zygote.pid is None  # none until iter() has a dataset to warm it
    assert not ours._backend._early
    assert_same(_epochs(ours, 2), _epochs(loader(TorchDataLoader), 2))
    own = ours._backend._zygote.pid
    with open(f"/proc/{own}/status") as status:
        parent = int(status.read().split("PPid:")[1].split()[0])
    assert parent == _zygote_process._zygote_process.pid
    del ours
    gc.collect()
    deadline = time.monotonic() + 10  # killed; reaped by the trainer's zygote
    while os.path.exists(f"/proc/{own}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/{own}")


class Counting(IterableDataset):
    """State a worker mutates (`taken`), state the trainer sets between
    epochs (`offset`), and what worker_init_fn did to this copy (`inits`)."""

    def __init__(self, count):
        self.count, self.offset, self.taken, self.inits = count, 0, 0, 0

    def __iter__(self):
        info = get_worker_info()
        for i in range(info.id, self.count, info.num_workers):
            self.taken += 1
            yield torch.tensor([self.offset + i, self.taken, self.inits, info.id,
                                info.num_workers, info.seed % (1 << 62),
                                int(info.dataset is self)])


def count_inits(worker_id):
    info = get_worker_info()
    info.dataset.inits += 1
    with open(info.dataset.log, "a") as log:
        log.write(f"{worker_id}\n")


def _epochs(loader, epochs, between=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = []
        for epoch in range(epochs):
            if between is not None:
                between(epoch)
            result.append([batch.tolist() for batch in loader])
        return result


def assert_same(ours, torchs):
    assert ours == torchs
    assert all(epoch for epoch in ours)


@pytest.mark.parametrize("persistent", [False, True])
def test_each_epochs_workers_see_what_torchs_see(tmp_path, persistent):
    # Non-persistent: a fresh copy each epoch (taken and inits start again,
    # the trainer's offset is seen, worker_init_fn runs again, a new base
    # seed); persistent: the workers' copies go on.
    runs = {}
    for name, loader_class in (("torch", TorchDataLoader), ("ours", ringloader.DataLoader)):
        dataset = Counting(7)
        dataset.log = str(tmp_path / f"{name}.log")
        loader = loader_class(dataset, batch_size=2, num_workers=2, worker_init_fn=count_inits,
                              persistent_workers=persistent,
                              generator=torch.Generator().manual_seed(5))
        runs[name] = _epochs(loader, 3, lambda epoch: setattr(dataset, "offset", 100 * epoch))
        assert dataset.taken == dataset.inits == 0  # the trainer's copy is untouched
    assert_same(runs["ours"], runs["torch"])
    inits = (tmp_path / "ours.log").read_text().split()
    assert sorted(inits) == sorted((tmp_path / "torch.log").read_text().split())
    assert len(inits) == (2 if persistent else 6)


class RecordsWhoUnpicklesIt(IterableDataset):
    """Appends the name of each process that unpickles it to `log`."""

    def __init__(self, log):
        self.log = log

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open("/proc/self/comm") as comm, open(self.log, "a") as log:
            log.write(comm.read().strip() + "\n")

    def __iter__(self):
        yield from range(4)


@pytest.mark.parametrize("persistent", [False, True])
def test_each_worker_unpickles_the_dataset_and_its_server_does_not(tmp_path, persistent):
    # The server keeps it as bytes (_workers/dataset_bytes.py): one cold
    # unpickle per worker on the way to its first batch, not two. A loader
    # zygote forked by the trainer's may unpickle it once for its imports.
    log = tmp_path / "unpickled-by"
    loader = ringloader.DataLoader(RecordsWhoUnpicklesIt(str(log)), batch_size=2,
                                   num_workers=2, persistent_workers=persistent)
    for _ in range(2):
        assert [batch.tolist() for batch in loader] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    names = [name for name in log.read_text().split() if name != "rl-zygote"]
    assert "rl-server" not in names
    assert len(names) == (2 if persistent else 4), names
