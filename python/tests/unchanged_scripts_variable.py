# SPDX-License-Identifier: BSD-3-Clause
"""Helpers for test_unchanged_variable_scripts.py: where the public scripts
are kept on this machine, how a run is seeded without editing the script,
and which lines of the output are compared.

The public scripts are not vendored (as for pytorch/examples in
test_unchanged_scripts.py): scripts/get_real_scripts.sh brings
torchvision 0.14.1's references (Debian's pytorch-vision source package,
the torchvision Debian's python3-torchvision is built from) and pycocotools
(PyPI) into ~/.cache/ringloader; the tests that need them skip, naming
that script, when they are absent.
"""
import os
import re
import subprocess
import sys

CACHE = os.path.expanduser("~/.cache/ringloader")

# torch.manual_seed(0), then the script as `python script.py args` runs it
# (its folder first on sys.path). The script itself is not touched: this is
# what a --seed option would do, for scripts that have none.
SEEDED = """\
import os, runpy, sys
import torch
torch.manual_seed(0)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def torchvision_references():
    """The folder holding torchvision 0.14.1's references/detection, or None."""
    for root in (os.environ.get("RINGLOADER_TORCHVISION_REFERENCES"),
                 os.path.join(CACHE, "src", "vision-0.14.1", "references")):
        if root and os.path.exists(os.path.join(root, "detection", "train.py")):
            return root
    return None


# Stonesjtu/Pytorch-NCE (MIT): example/main.py, a PTB language model whose
# DataLoader pads sentences of any length with pad_sequence. On no package
# registry (PyPI's pytorch-nce holds the nce package only): a checkout of
# this commit at CACHE/src/pytorch-nce is used where present.
NCE_COMMIT = "1fae107a92e24e39f25dd69b766806709c70d414"


def pytorch_nce():
    """The Pytorch-NCE checkout (its example/ and data/penn), or None."""
    root = os.path.join(CACHE, "src", "pytorch-nce")
    needed = ("example/main.py", "example/data/penn/valid.txt", "nce/nce_loss.py")
    return root if all(os.path.exists(os.path.join(root, n)) for n in needed) else None


def _installed(modules, folder):
    """"" when every module imports as is, the cached pip --target
    `folder`-py<this Python's version> where it holds them (a compiled
    module fits one Python only), or None."""
    import importlib
    try:
        for module in modules:
            importlib.import_module(module)
        return ""
    except ImportError:
        pass
    target = os.path.join(CACHE, f"{folder}-py{sys.version_info[0]}{sys.version_info[1]}")
    return target if all(os.path.isdir(os.path.join(target, m)) for m in modules) else None


def nce_dependencies():
    """The folder holding tqdm and dill for Pytorch-NCE ("" when they import
    as they are), or None."""
    return _installed(("dill", "tqdm"), "nce-deps")


def pycocotools_path():
    """"" when pycocotools imports as is, the cached --target folder where it
    was installed there, or None."""
    return _installed(("pycocotools",), "pycocotools")


def environment(*extra):
    """os.environ with PYTHONPATH made absolute (the scripts run elsewhere)."""
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, *[e for e in extra if e]]))


def run(args, cwd, swap, extra_path=(), timeout=600):
    """stdout and stderr of `python [-m ringloader] args`, which must exit 0."""
    command = [sys.executable] + (["-m", "ringloader"] if swap else []) + list(args)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=environment(*extra_path))
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout, done.stderr


REPORTING = """\
import os, runpy, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
found = runpy.run_path(sys.argv[0], run_name="__main__")
print("loader", type(found["corpus"].train).__module__, file=sys.stderr)
"""


def nce_log_lines(path):
    """Pytorch-NCE's log file without its timestamps and logger name."""
    with open(path) as f:
        return [re.sub(r"time: *[0-9.]+s", "time", line.split(" - ", 2)[2])
                for line in f.read().splitlines() if " - " in line]


# Fields of the references' MetricLogger lines that time the run.
TIMING = re.compile(r"\s*(eta|time|data|max mem|model_time|evaluator_time): "
                    r"[0-9:.]+( \([0-9.]+\))?")


def detection_lines(stdout):
    """The lines of references/detection/train.py's output that depend on
    the data only: every training step's lr and losses (timings cut), the
    aspect-ratio bins, and COCO's AP/AR summary."""
    kept = []
    for line in stdout.splitlines():
        if line.startswith("Epoch: [") and "Total time" not in line:
            kept.append(TIMING.sub("", line))
        elif line.startswith((" Average Precision", " Average Recall", "Count of instances",
                              "Using [")):
            kept.append(line)
    return kept

