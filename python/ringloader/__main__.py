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
import types

USAGE = "usage: python -m ringloader SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def swap_dataloader():
    """Make ``torch.utils.data.DataLoader`` ringloader's (what a monkeypatch
    in the script would do), and ``torch.utils.data.dataloader.DataLoader``
    as a script imports it (``from torch.utils.data.dataloader import
    DataLoader``)."""
    import torch.utils.data
    import torch.utils.data.dataloader

    from .dataloader import DataLoader
    torch.utils.data.DataLoader = DataLoader
    module = sys.modules["torch.utils.data.dataloader"]
    if not isinstance(module, _LoaderModuleView):
        view = _LoaderModuleView(module, DataLoader)
        sys.modules["torch.utils.data.dataloader"] = view
        torch.utils.data.dataloader = view


class _LoaderModuleView(types.ModuleType):
    """torch.utils.data.dataloader as scripts import from it: every name is
    the module's own but ``DataLoader``. The module itself is left alone:
    torch's code there reads ``DataLoader`` as a global
    (``super(DataLoader, self).__setattr__``), which must stay torch's class
    (ringloader's subclasses it: the swapped name recursed there)."""

    def __init__(self, module, loader):
        super().__init__(module.__name__, module.__doc__)
        for name in ("__file__", "__spec__", "__loader__", "__package__", "__path__"):
            if hasattr(module, name):
                setattr(self, name, getattr(module, name))
        self._ringloader_module = module
        self.DataLoader = loader

    def __getattr__(self, name):
        return getattr(self._ringloader_module, name)

    def __dir__(self):
        return sorted(set(dir(self._ringloader_module)) | {"DataLoader"})


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    swap_dataloader()
    _swap_in_spawned_children()
    _freeze_what_is_imported()
    if argv[0] == "-m":
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        _path_as_for_a_script(argv[0])
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


def _freeze_what_is_imported():
    """Moves every object alive now (torch's, ringloader's and the standard
    library's modules: nothing of the script's yet) out of the garbage
    collector's reach (gc.freeze), unless $RINGLOADER_GC_FREEZE is 0.

    Why: a full collection in a process holding torch walks its ~250,000
    objects (75-115 ms on 2 cores), and the zygote forked at ``import
    ringloader`` shares those pages, so each walk also copies them. With
    ringloader imported first, ``import datasets`` in the script ran two
    such collections instead of the one it runs under torch's loader
    (gc.callbacks, bench/clients_streams.py). Frozen objects are freed as
    ever when their count drops to zero; only a reference cycle among
    them is never collected, and these are modules and what they hold,
    which live as long as the process."""
    import gc
    import os
    if os.environ.get("RINGLOADER_GC_FREEZE", "1") != "0":
        gc.freeze()


def _path_as_for_a_script(script):
    """sys.path as ``python script.py`` has it: the script's folder first,
    not the working directory that ``python -m`` put there. With the
    working directory left in, a module beside it (a ``datasets/`` folder)
    would shadow a library the script imports, and every import would
    search one folder more. ``-P`` (safe_path) puts neither there."""
    if not getattr(sys.flags, "safe_path", False):  # 3.11+
        sys.path[0] = _folder_of(script)


def _folder_of(path):
    import os
    return os.path.dirname(os.path.abspath(path))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
