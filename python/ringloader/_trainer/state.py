# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader.state_dict() as plain values and tensors (for torch.save):
the epoch in progress, the batches of it already handed out, the epoch's
order when a torch sampler chose it, and the generators' states so the
epochs after the resumed one draw the same orders.

Elastic resume: a state saved at world size W restores at W' (the native
loader splits what the job left of the epoch, see docs/distributed.md);
``merge`` turns the states of all W ranks into one that records each
rank's own batch count."""
import torch

from ringloader import _ringloader
from ringloader._trainer.distributed import ShardSampler
from ringloader._ringloader import OptionError

VERSION = 2
# Keys a state may differ in from the loader restoring it (elastic resume).
_ELASTIC_KEYS = ("rank", "world_size")


def empty_state(loader, epoch):
    return {"version": VERSION, "epoch": int(epoch), "in_progress": False,
            "batches_consumed": 0,
            "batches_in_epoch": len(loader), "order": None, "native": None,
            "elastic": [], "config": _config(loader), **_generator_states(loader)}


def native_state(loader, native_loader, in_progress):
    """The native loader's state (it knows the position); its order list
    travels as an int64 tensor, a few bytes a sample. `in_progress`: an
    epoch was started and not run to its end."""
    native = native_loader.state_dict()
    order = native.pop("order")
    state = empty_state(loader, native["epoch"])
    state.update(in_progress=in_progress,
                 batches_consumed=native["batches_consumed"],
                 batches_in_epoch=native["batches_in_epoch"], native=native,
                 order=torch.tensor(order, dtype=torch.int64) if order else None)
    return state


def in_process_state(loader, iterator):
    state = empty_state(loader, iterator.epoch)
    state.update(in_progress=True, batches_consumed=iterator.consumed,
                 batches_in_epoch=len(iterator.batches),
                 order=torch.tensor(iterator.order, dtype=torch.int64),
                 elastic=[dict(stage) for stage in iterator.elastic])
    return state


def check(loader, state, in_ring, builtin_order):
    """Refuses a state of another version or configuration (ValueError).
    `in_ring`: the loader runs its epochs through a native loader (workers),
    not in process; `builtin_order`: the C++ sampler makes its order."""
    # Version 1 (before elastic resume) is read: its native part is upgraded
    # by the C++ loader, and it has no elastic history.
    if not isinstance(state, dict) or state.get("version") not in (1, VERSION):
        raise OptionError(f"ringloader: not a DataLoader state of version {VERSION}")
    mine = _config(loader)
    for key, value in state["config"].items():
        if key in _ELASTIC_KEYS:
            continue
        if mine.get(key) != value:
            raise OptionError(f"ringloader: the state was saved with {key}={value!r}, "
                              f"this DataLoader has {mine.get(key)!r}; resume with "
                              f"the same configuration")
    if (state["native"] is None) == in_ring:
        raise OptionError("ringloader: the state was saved by a DataLoader of "
                          "another kind (native workers vs in-process)")
    saved = (state["config"]["rank"], state["config"]["world_size"])
    if saved != (loader.rank, loader.world_size) and state["in_progress"]:
        if not in_ring and not isinstance(loader._order_sampler, ShardSampler):
            raise OptionError(f"ringloader: a state of rank {saved[0]} of {saved[1]} "
                              f"restores into rank {loader.rank} of {loader.world_size} "
                              f"only with ringloader's own order (distributed=True or a "
                              f"Mix, no sampler)")
        if not builtin_order:
            raise OptionError("ringloader: only the built-in order (shuffle / "
                              "distributed, no sampler) resumes at another world "
                              "size or rank; a sampler's order is its own")


def merge(loader, states, in_ring, builtin_order):
    """One state from the states of all ranks of a job (a list, any order):
    the native loader checks they agree and records each rank's batch count
    (`in_ring`, `builtin_order`: as check's)."""
    states = list(states)
    if not states:
        raise OptionError("ringloader: load_state_dict got an empty list of states")
    for state in states:
        check(loader, state, in_ring, builtin_order)
    if all(state["native"] is None for state in states):
        return _merge_in_process(states)
    merged = dict(states[0])
    by_rank = sorted(states, key=lambda state: state["config"]["rank"])
    merged.update(by_rank[0])
    native = _ringloader.merge_states([native_dict(state) for state in states])
    native.pop("order")
    merged["native"] = native
    merged["in_progress"] = any(state["in_progress"] for state in states)
    return merged


def native_dict(state):
    """The C++ state back, with its order as a list."""
    native = dict(state["native"])
    order = state["order"]
    native["order"] = [] if order is None else [int(i) for i in order.tolist()]
    return native


def restore_generators(loader, state):
    if state["generator"] is not None and loader.generator is not None:
        loader.generator.set_state(state["generator"])
    own = _sampler_generator(loader)
    if state["sampler_generator"] is not None and own is not None:
        own.set_state(state["sampler_generator"])


def order_list(state):
    return None if state["order"] is None else [int(i) for i in state["order"].tolist()]


def _config(loader):
    return {"dataset_size": len(loader.dataset), "batch_size": loader.batch_size,
            "drop_last": loader.drop_last, "seed": loader.seed,
            "rank": loader.rank, "world_size": loader.world_size}


def _sampler_generator(loader):
    own = getattr(loader._order_sampler, "generator", None)
    if isinstance(own, torch.Generator) and own is not loader.generator:
        return own
    return None


def _generator_states(loader):
    own = _sampler_generator(loader)
    return {"generator": (loader.generator.get_state()
                          if loader.generator is not None else None),
            "sampler_generator": own.get_state() if own is not None else None}


def _merge_in_process(states):
    """merge() for in-process states: the same checks as the C++
    LoaderState::merge, in Python."""
    world = states[0]["config"]["world_size"]
    if len(states) != world:
        raise OptionError(f"ringloader: the loader states to merge disagree: "
                          f"{len(states)} states for world size {world}")
    by_rank = {}
    for state in states:
        rank = state["config"]["rank"]
        if state["config"]["world_size"] != world or rank in by_rank:
            raise OptionError(f"ringloader: the loader states to merge disagree: rank "
                              f"{rank} is of another world size or given twice")
        if state["epoch"] != states[0]["epoch"] or \
                state.get("elastic", []) != states[0].get("elastic", []):
            raise OptionError(f"ringloader: the loader states to merge disagree: rank "
                              f"{rank} is at epoch {state['epoch']} or has another "
                              f"elastic history")
        by_rank[rank] = state
    merged = dict(by_rank[0])
    merged["rank_batches"] = [int(by_rank[r]["batches_consumed"]) for r in range(world)]
    merged["in_progress"] = any(state["in_progress"] for state in states)
    return merged


def in_process_resume(loader, state):
    """Where the in-process iterator resumes: at the same rank and world
    size, its own order and position; else (elastic) this rank's share of
    what the saving job left of the epoch, from ringloader's sampler."""
    epoch = int(state["epoch"])
    saved_rank, saved_world = state["config"]["rank"], state["config"]["world_size"]
    history = [dict(stage) for stage in state.get("elastic", [])]
    counts = state.get("rank_batches")
    if saved_world == loader.world_size:
        consumed = counts[loader.rank] if counts else int(state["batches_consumed"])
        order = (order_list(state) if saved_rank == loader.rank
                 else loader._order_sampler.order(epoch, history))
        return {"epoch": epoch, "batches_consumed": consumed, "order": order,
                "elastic": history}
    counts = counts or [int(state["batches_consumed"])] * saved_world
    if any(counts):
        history.append({"world_size": saved_world, "batches": list(counts)})
    return {"epoch": epoch, "batches_consumed": 0,
            "order": loader._order_sampler.order(epoch, history), "elastic": history}
