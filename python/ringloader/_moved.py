# SPDX-License-Identifier: BSD-3-Clause
"""Module paths of earlier releases, still importable: pickles name a class
by its module, so an object pickled before a module moved (issue 44's
layout) must load after it. ``import ringloader._batch_codec`` (or a
pickle's ``ringloader._batch_codec.TooBig``) gets the module where the code
lives now, the same module object, registered under the old name too.

Runs in every process that imports ringloader (trainer and workers); imports
nothing of the package until an old name is asked for."""
import importlib
import importlib.abc
import importlib.util
import sys

# old module under ringloader -> where it lives now
MOVED = {
    "_batch_codec": "_slots.batch_codec",
    "_batch_structure": "_slots.batch_structure",
    "_batch_writer": "_slots.batch_writer",
    "_collate": "_slots.collate",
    "_tensor_rows": "_slots.tensor_rows",
    "_zygote": "_workers.zygote",
    "_worker": "_workers.worker",
    "_iterable_worker": "_workers.iterable_worker",
    "_stub_gate": "_workers.stub_gate",
    "_backend": "_trainer.backend",
    "_arguments": "_trainer.arguments",
    "_options": "_trainer.options",
    "_state": "_trainer.state",
    "_stream": "_trainer.stream",
    "_distributed": "_trainer.distributed",
    "_device": "_trainer.device",
    "_torch_fallback": "_trainer.torch_fallback",
    "_iterator": "_trainer.iterator",
    "_iterable": "_trainer.iterable",
    "_in_process": "_trainer.in_process",
    "_batches": "_trainer.batches",
    "_ring": "_trainer.ring",
    "_reconfigure": "_trainer.reconfigure",
    "_python_workers": "_trainer.python_workers",
    "_fork_threads": "_trainer.fork_threads",
    "_native_datasets": "_native.datasets",
    "_native_rows": "_native.rows",
    "_sample_views": "_native.sample_views",
    "_convert_autoaugment": "_native.convert_autoaugment",
    "_convert_v2": "_native.convert_v2",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ringloader.<old> and loads it as the module at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, old = fullname.partition(".")
        if package != "ringloader" or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("ringloader." + MOVED[spec.name.split(".", 1)[1]])

    def exec_module(self, module):
        pass  # the new module ran when imported above


def install():
    # First on the path: a stale copy of an old module left in a build or
    # install folder must not load as a second, different module.
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
