# SPDX-License-Identifier: BSD-3-Clause
"""One rank of test_elastic.py's gloo jobs. Phase "save": iterate `stop`
batches of epoch 0, save the state. Phase "resume": load every saved state
(the list, or rank 0's alone with "single"), finish epoch 0, run epoch 1,
and run epoch 1 on a fresh loader too. Labels are sample indices, so each
batch says which samples it holds; rank 0 writes what all ranks saw.

    RANK=r WORLD_SIZE=w MASTER_ADDR=... MASTER_PORT=... \\
        python3 elastic_rank.py PHASE FOLDER TARS STATES.pt OUT.json STOP [single]
"""
import json
import sys

import torch
import torch.distributed as dist

import ringloader
from ringloader import transforms as T
from index_dataset import IndexDataset

BATCH = 2


def datasets(folder, tars):
    listed = ringloader.datasets.ImageFolder(folder)
    files = ringloader.datasets.FileList(
        [(path, i) for i, (path, _) in enumerate(listed.samples)],
        T.Compose([T.CenterCrop(4), T.ToTensor()]))
    shards = ringloader.datasets.TarShards(tars, T.Compose([T.CenterCrop(2), T.ToTensor()]),
                                           shuffle_buffer=3)
    python = IndexDataset(len(files), width=2)
    # (name, dataset, workers): Python datasets run in Python workers (the
    # native loader's elastic split) and in process (the Python iterator's).
    return {"folder": (files, 1), "tar": (shards, 1), "python": (python, 1),
            "python_in_process": (python, 0)}


def loader_for(entry):
    dataset, workers = entry
    return ringloader.DataLoader(dataset, batch_size=BATCH, shuffle=True, seed=11,
                                 num_workers=workers, distributed=True)


def labels(batches):
    return [[int(v) for v in y] for _, y in batches]


def save_phase(sets, states_path, stop):
    seen, states = {}, {}
    for name, dataset in sets.items():
        loader = loader_for(dataset)
        loader.set_epoch(0)
        it = iter(loader)
        seen[name] = labels(next(it) for _ in range(stop))
        states[name] = loader.state_dict()
        del it, loader
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, states)
    if dist.get_rank() == 0:
        torch.save(gathered, states_path)
    return {"seen": seen}


def resume_phase(sets, states_path, single):
    saved = torch.load(states_path)
    out = {"rest": {}, "next": {}, "fresh": {}, "len": {}}
    for name, dataset in sets.items():
        loader = loader_for(dataset)
        states = [ranks[name] for ranks in saved]
        loader.load_state_dict(states[0] if single else states)
        loader.set_epoch(0)
        out["rest"][name] = labels(loader)
        state = loader.state_dict()
        assert state["config"]["world_size"] == dist.get_world_size(), state
        loader.set_epoch(1)
        out["next"][name] = labels(loader)
        fresh = loader_for(dataset)
        fresh.set_epoch(1)
        out["fresh"][name] = labels(fresh)
        out["len"][name] = len(dataset[0])
        del loader, fresh
    return out


def main(phase, folder, tars, states_path, out, stop, single=False):
    dist.init_process_group("gloo")
    sets = datasets(folder, tars)
    result = (save_phase(sets, states_path, int(stop)) if phase == "save"
              else resume_phase(sets, states_path, single))
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:7], single=len(sys.argv) > 7)
