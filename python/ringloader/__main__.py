# SPDX-License-Identifier: BSD-3-Clause
"""Run a training script unchanged, with ringloader.DataLoader in place of
torch.utils.data.DataLoader:

    python -m ringloader train.py --epochs 1 ...
    python -m ringloader -m package.train --epochs 1 ...

The script sees ``sys.argv`` as if it had been started itself, and every
``torch.utils.data.DataLoader`` it builds (however imported from
``torch.utils.data``) is ringloader's.
"""
import runpy
import sys

USAGE = "usage: python -m ringloader SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def swap_dataloader():
    """Make ``torch.utils.data.DataLoader`` ringloader's (what a monkeypatch
    in the script would do)."""
    import torch.utils.data

    from .dataloader import DataLoader
    torch.utils.data.DataLoader = DataLoader


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    swap_dataloader()
    _swap_in_spawned_children()
    if argv[0] == "-m":
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, _folder_of(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


def _swap_in_spawned_children():
    """Processes the script spawns (mp.spawn, multiprocessing "spawn") start
    a fresh interpreter: _spawn_hook/sitecustomize.py swaps DataLoader there
    too. Forked children inherit this process's swap as it is."""
    import os
    hook = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_spawn_hook")
    os.environ["RINGLOADER_SWAP_DATALOADER"] = "1"
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = hook + (os.pathsep + path if path else "")


def _folder_of(path):
    import os
    return os.path.dirname(os.path.abspath(path))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
