# SPDX-License-Identifier: BSD-3-Clause
"""Started by ``python -m ringloader``: the processes a script spawns
(``torch.multiprocessing.spawn``, ``multiprocessing`` with "spawn" or
"forkserver") are fresh interpreters that would build torch's DataLoader
again. ``python -m ringloader`` puts this folder first on their PYTHONPATH,
so each of them swaps DataLoader too, right after ``import torch`` has
finished (never while torch is half imported). Debian's own
``sitecustomize`` (which this file shadows) is run afterwards."""
import importlib.abc
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _SwapAfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of ``torch`` so that the
    swap runs when torch's import completes."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot; also keeps find_spec below from recursing
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_then_swap(module):
            real_exec(module)
            # torch's import is still open here (its module lock held, its
            # spec initialising): a zygote forked now would import torch a
            # second time, half-way. So `import ringloader` starts none; the
            # first loader with a Python dataset starts it.
            before = os.environ.get("RINGLOADER_PRESTART")
            os.environ["RINGLOADER_PRESTART"] = "0"
            try:
                from ringloader.__main__ import swap_dataloader
                swap_dataloader()
            finally:
                if before is None:
                    del os.environ["RINGLOADER_PRESTART"]
                else:
                    os.environ["RINGLOADER_PRESTART"] = before

        spec.loader.exec_module = exec_then_swap
        return spec


def _run_shadowed_sitecustomize():
    for folder in sys.path:
        if not folder or os.path.abspath(folder) == _HERE:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


if os.environ.get("RINGLOADER_SWAP_DATALOADER") == "1" and "torch" not in sys.modules:
    sys.meta_path.insert(0, _SwapAfterTorch())
_run_shadowed_sitecustomize()
